package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// A server killed (kill -9) after Telegram made the question's message
// and before its answer (the message's ID) reached the server: nothing
// noted which message asks the question. Started again, the server
// sends the question again; the person may hold two copies, and either
// must answer.

// crashUnnoted asks question, kills the server the moment Telegram has
// made its message (its answer held), and starts it again: the question
// is sent again. It returns the first copy's message ID and its first
// button's data and label, the second copy's ID, and the agent's call.
func crashUnnoted(t *testing.T, tg *telegramtest.API, question string) (first int, data, label string, second int, done chan callResult) {
	t.Helper()
	made, release := tg.HoldAnswer("sendMessage")
	_, done = crashAsked(t, func(string) string { return telegramConfig(tg.URL) }, question, func(*server) {
		select {
		case <-made:
		case <-time.After(10 * time.Second):
			t.Fatal("the question never went to Telegram")
		}
	})
	form := tg.Call(t, "sendMessage", 1)
	first = must[int](t)(strconv.Atoi(form["sent_message_id"]))
	kb := must[telegramtest.Keyboard](t)(telegramtest.KeyboardOf(form))
	data, label = kb.InlineKeyboard[0][0].CallbackData, kb.InlineKeyboard[0][0].Text
	release()
	again := tg.Call(t, "sendMessage", 2)
	if !strings.Contains(again["text"], question) {
		t.Fatalf("the second message sent is %q", again["text"])
	}
	second = must[int](t)(strconv.Atoi(again["sent_message_id"]))
	return first, data, label, second, done
}

// wantEdited waits until every message in msgs was edited to say the
// question is settled, its buttons gone.
func wantEdited(t *testing.T, tg *telegramtest.API, msgs ...int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	left := map[string]bool{}
	for _, m := range msgs {
		left[strconv.Itoa(m)] = true
	}
	err := tg.WaitFor(ctx, func(calls []telegramtest.Call) bool {
		for _, c := range calls {
			if c.Method == "editMessageText" && c.Form["_error"] == "" && strings.Contains(c.Form["reply_markup"], `"inline_keyboard":[]`) {
				delete(left, c.Form["message_id"])
			}
		}
		return len(left) == 0
	})
	if err != nil {
		t.Fatalf("messages %v never edited to say the question is settled", left)
	}
}

// TestSingleTelegramTapFirstCopyAfterKill9: the person taps a button of
// the copy sent before the crash, the one the server never knew the ID
// of: it answers, is told so, and both copies lose their buttons.
func TestSingleTelegramTapFirstCopyAfterKill9(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	first, data, label, second, done := crashUnnoted(t, tg, "Tap the first copy?")
	tg.Push(telegramtest.Callback(chat, first, data))
	wantAnswer(t, done, label)
	if got := tg.Call(t, "answerCallbackQuery", 1)["text"]; got != "Answered: "+label {
		t.Errorf("the tap was told %q", got)
	}
	wantEdited(t, tg, first, second)
	if said := tg.Said("earlier copy"); len(said) != 1 {
		t.Errorf("the copy sent again says an earlier one may be there %d times, want once", len(said))
	}
}

// TestSingleTelegramReplyFirstCopyAfterKill9: as above, the person
// replies to the first copy: the reply answers, and no one is told it
// was not taken.
func TestSingleTelegramReplyFirstCopyAfterKill9(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	first, _, _, second, done := crashUnnoted(t, tg, "Reply to the first copy?")
	tg.Push(telegramtest.Reply(chat, 601, first, "Ship it."))
	wantAnswer(t, done, "Ship it.")
	waitConfirmed(t, tg, 1)
	for _, said := range tg.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
	wantEdited(t, tg, first, second)
}

// TestSingleTelegramEditOwedAcrossKill9: the person taps an answer; the
// server is killed as it edits the message to say so (the edit not yet
// made): started again, it makes the edit it owes, so that the message
// keeps no buttons that would answer "no longer pending".
func TestSingleTelegramEditOwedAcrossKill9(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	port, data := freePort(t), t.TempDir()
	s := startSingle(t, port, data, telegramConfig(tg.URL))
	agent := startMCP(t, s, tokenA)
	done := askAsync(agent, "Edited after the crash?")
	form := tg.Call(t, "sendMessage", 1)
	msg := must[int](t)(strconv.Atoi(form["sent_message_id"]))
	kb := must[telegramtest.Keyboard](t)(telegramtest.KeyboardOf(form))
	waitNotedHere(t, s)
	editing, release := tg.Hold("editMessageText")
	tg.Push(telegramtest.Callback(chat, msg, kb.InlineKeyboard[0][0].CallbackData))
	wantAnswer(t, done, kb.InlineKeyboard[0][0].Text)
	select {
	case <-editing:
	case <-time.After(10 * time.Second):
		t.Fatal("the message was never edited")
	}
	s.kill9(t)
	release()
	s2 := startSingle(t, port, data, telegramConfig(tg.URL))
	wantEdited(t, tg, msg)
	edit, err := tg.Wait(context.Background(), "editMessageText", 1)
	if err != nil || !strings.Contains(edit.Form["text"], "Answered on Telegram") {
		t.Errorf("the message was edited to %q (%v)", edit.Form["text"], err)
	}
	if !s2.logw.waitFor("a settled question's follow-up made at last", 10*time.Second) {
		t.Error("the log never said the edit owed was made")
	}
}

const slCrashBot, slCrashApp = "xoxb-e2e-unnoted-bot-token", "xapp-1-A1-e2e-unnoted-app-token"

func slackCrashConfig(sl *slacktest.API) string {
	return fmt.Sprintf("[channels.slack]\nbot_token = %q\napp_token = %q\nchannel = \"U42\"\nusers = [\"U42\"]\napi_url = %q\n", slCrashBot, slCrashApp, sl.APIURL())
}

// slackCrashUnnoted is crashUnnoted on Slack: the server is killed the
// moment Slack has posted the question (its answer held). It returns
// the first copy's timestamp and its first button's value and label,
// and the second copy's timestamp.
func slackCrashUnnoted(t *testing.T, sl *slacktest.API, question string) (first, value, label, second string, done chan callResult) {
	t.Helper()
	posted, release := sl.HoldAnswer("chat.postMessage")
	_, done = crashAsked(t, func(string) string { return slackCrashConfig(sl) }, question, func(*server) {
		select {
		case <-posted:
		case <-time.After(10 * time.Second):
			t.Fatal("the question never went to Slack")
		}
	})
	form := sl.Call(t, "chat.postMessage", 1)
	first = form["_ts"]
	blocks := must[[]slacktest.Block](t)(slacktest.BlocksOf(form))
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.Type == "button" && value == "" {
				value, label = e.Value, e.Text.Text
			}
		}
	}
	release()
	again := sl.Call(t, "chat.postMessage", 2)
	if !strings.Contains(again["blocks"], question) {
		t.Fatalf("the second message posted is %q", again["blocks"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sl.Dialled(ctx, 2); err != nil {
		t.Fatal(err)
	}
	return first, value, label, again["_ts"], done
}

// wantUpdated waits until every Slack message in tss was updated to say
// the question is settled.
func wantUpdated(t *testing.T, sl *slacktest.API, tss ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	left := map[string]bool{}
	for _, ts := range tss {
		left[ts] = true
	}
	err := sl.WaitFor(ctx, func(calls []slacktest.Call) bool {
		for _, c := range calls {
			if c.Method == "chat.update" && c.Form["_error"] == "" && !strings.Contains(c.Form["blocks"], `"button"`) {
				delete(left, c.Form["ts"])
			}
		}
		return len(left) == 0
	})
	if err != nil {
		t.Fatalf("messages %v never updated to say the question is settled", left)
	}
}

// slackNotTaken fails t for every "Not taken" the bot posted.
func slackNotTaken(t *testing.T, sl *slacktest.API) {
	t.Helper()
	_ = sl.WaitFor(context.Background(), func(calls []slacktest.Call) bool {
		for _, c := range calls {
			if c.Method == "chat.postMessage" && strings.Contains(c.Form["text"], "Not taken") {
				t.Errorf("the person was told %q", c.Form["text"])
			}
		}
		return true
	})
}

// TestSingleSlackPressFirstCopyAfterKill9: the person presses a button
// of the copy posted before the crash: it answers, and both copies are
// updated to say so.
func TestSingleSlackPressFirstCopyAfterKill9(t *testing.T) {
	sl := slacktest.Start(t, slCrashBot, slCrashApp)
	first, value, label, second, done := slackCrashUnnoted(t, sl, "Press the first copy?")
	sl.Envelope(t, "interactive", slacktest.Press("U42", slacktest.DM("U42"), first, value))
	wantAnswer(t, done, label)
	wantUpdated(t, sl, first, second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = sl.WaitFor(ctx, func(calls []slacktest.Call) bool {
		for _, c := range calls {
			if c.Method == "chat.postEphemeral" {
				t.Errorf("the press was told %q", c.Form["text"])
			}
		}
		return true
	})
	if again := sl.Call(t, "chat.postMessage", 2); !strings.Contains(again["blocks"], "earlier copy") {
		t.Errorf("the copy posted again does not say an earlier one may be there: %s", again["blocks"])
	}
}

// TestSingleSlackReplyFirstCopyAfterKill9: the person replies in the
// thread of the copy posted before the crash: the reply answers.
func TestSingleSlackReplyFirstCopyAfterKill9(t *testing.T) {
	sl := slacktest.Start(t, slCrashBot, slCrashApp)
	first, _, _, second, done := slackCrashUnnoted(t, sl, "Reply to the first copy?")
	sl.Envelope(t, "events_api", slacktest.ThreadReply("U42", slacktest.DM("U42"), first, "Ship it."))
	wantAnswer(t, done, "Ship it.")
	wantUpdated(t, sl, first, second)
	slackNotTaken(t, sl)
}

// TestSingleSlackUpdateOwedAcrossKill9: the server is killed as it
// updates the answered question's message: started again, it makes the
// update it owes.
func TestSingleSlackUpdateOwedAcrossKill9(t *testing.T) {
	sl := slacktest.Start(t, slCrashBot, slCrashApp)
	port, data := freePort(t), t.TempDir()
	s := startSingle(t, port, data, slackCrashConfig(sl))
	agent := startMCP(t, s, tokenA)
	done := askAsync(agent, "Updated after the crash?")
	ts := sl.Call(t, "chat.postMessage", 1)["_ts"]
	waitNotedHere(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sl.Connected(ctx); err != nil {
		t.Fatal(err)
	}
	updating, release := sl.Hold("chat.update")
	sl.Envelope(t, "events_api", slacktest.ThreadReply("U42", slacktest.DM("U42"), ts, "Ship it."))
	wantAnswer(t, done, "Ship it.")
	select {
	case <-updating:
	case <-time.After(10 * time.Second):
		t.Fatal("the message was never updated")
	}
	s.kill9(t)
	release()
	startSingle(t, port, data, slackCrashConfig(sl))
	wantUpdated(t, sl, ts)
}
