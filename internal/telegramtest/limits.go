package telegramtest

import (
	"encoding/json"
	"errors"
	"html"
	"strings"
	"unicode/utf16"
)

// What Telegram refuses of a message (https://core.telegram.org/bots/api#formatting-options,
// #sendmessage, #sendphoto): a text of 1 to 4,096 characters and a
// caption of at most 1,024, counted in UTF-16 code units once its
// entities are parsed; HTML with only the tags and entities the Bot API
// names, every tag closed in order. The double answers these as
// Telegram does, 400 Bad Request, so that a test sees what a real chat
// would refuse.

const (
	maxText    = 4096
	maxCaption = 1024
	// maxNotice bounds the text of a tap's notice (answerCallbackQuery).
	maxNotice = 200
)

// htmlTags are the tags parse_mode HTML takes.
var htmlTags = map[string]bool{"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true,
	"s": true, "strike": true, "del": true, "span": true, "tg-spoiler": true, "a": true, "code": true,
	"pre": true, "blockquote": true, "tg-emoji": true}

// parseHTML is the text of s once its tags and entities are parsed, as
// parse_mode HTML reads it; an error as Telegram words it.
func parseHTML(s string) (string, error) {
	var out strings.Builder
	var open []string
	for len(s) > 0 {
		switch s[0] {
		case '<':
			end := strings.IndexByte(s, '>')
			if end < 0 {
				return "", errors.New("can't parse entities: unclosed start tag")
			}
			tag := s[1:end]
			s = s[end+1:]
			if name, ok := strings.CutPrefix(tag, "/"); ok {
				if len(open) == 0 || open[len(open)-1] != name {
					return "", errors.New("can't parse entities: unmatched end tag \"" + name + "\"")
				}
				open = open[:len(open)-1]
				continue
			}
			name, _, _ := strings.Cut(tag, " ")
			if !htmlTags[name] {
				return "", errors.New("can't parse entities: unsupported start tag \"" + name + "\"")
			}
			open = append(open, name)
		case '&':
			end := strings.IndexByte(s, ';')
			ent := ""
			if end > 0 {
				ent = s[:end+1]
			}
			switch {
			case ent == "&lt;" || ent == "&gt;" || ent == "&amp;" || ent == "&quot;",
				strings.HasPrefix(ent, "&#") && len(ent) > 3 && html.UnescapeString(ent) != ent:
				out.WriteString(html.UnescapeString(ent))
				s = s[len(ent):]
			default:
				return "", errors.New("can't parse entities: unsupported entity")
			}
		case '>':
			return "", errors.New("can't parse entities: unexpected end tag")
		default:
			i := strings.IndexAny(s, "<&>")
			if i < 0 {
				i = len(s)
			}
			out.WriteString(s[:i])
			s = s[i:]
		}
	}
	if len(open) > 0 {
		return "", errors.New("can't find end tag corresponding to start tag \"" + open[len(open)-1] + "\"")
	}
	return out.String(), nil
}

// utf16Len is how Telegram counts a text's length.
func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }

// refused is why Telegram would refuse the text (parse_mode as given)
// of a message, or its caption; "" when it would take it.
func refused(method string, form map[string]string) string {
	if why := markupRefused(form); why != "" {
		return why
	}
	field, most := "text", maxText
	if method == "sendPhoto" {
		field, most = "caption", maxCaption
	}
	text, ok := form[field]
	if !ok && field == "caption" {
		return ""
	}
	if form["parse_mode"] == "HTML" {
		var err error
		if text, err = parseHTML(text); err != nil {
			return err.Error()
		}
	}
	switch n := utf16Len(strings.TrimSpace(text)); {
	case n == 0 && field == "text":
		return "message text is empty"
	case n > most && field == "text":
		return "message is too long"
	case n > most:
		return "message caption is too long"
	}
	return ""
}

// buttonKinds are the optional fields of an InlineKeyboardButton that
// say what it does (https://core.telegram.org/bots/api#inlinekeyboardbutton):
// "Exactly one of the optional fields must be used to specify type of
// the button."
var buttonKinds = []string{"url", "callback_data", "web_app", "login_url", "switch_inline_query",
	"switch_inline_query_current_chat", "switch_inline_query_chosen_chat", "copy_text", "callback_game", "pay"}

// markupRefused is why Telegram would refuse a message's inline
// keyboard (reply_markup): a button of no kind or of several (an empty
// copy_text beside callback_data is two), or callback_data not of 1 to
// 64 bytes; "" when it would take it.
func markupRefused(form map[string]string) string {
	rm, ok := form["reply_markup"]
	if !ok {
		return ""
	}
	var kb struct {
		InlineKeyboard [][]map[string]json.RawMessage `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(rm), &kb); err != nil {
		return "can't parse reply keyboard markup JSON object"
	}
	for _, row := range kb.InlineKeyboard {
		for _, b := range row {
			kinds := 0
			for _, k := range buttonKinds {
				if _, ok := b[k]; ok {
					kinds++
				}
			}
			if kinds != 1 {
				return "BUTTON_TYPE_INVALID"
			}
			if raw, ok := b["callback_data"]; ok {
				var data string
				if json.Unmarshal(raw, &data) != nil || data == "" || len(data) > 64 {
					return "BUTTON_DATA_INVALID"
				}
			}
		}
	}
	return ""
}
