package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// ClientNickname is who answered, in the inbox, when the person answered
// in the form the agent's MCP client showed; the client's name follows it
// when the client gave one.
const ClientNickname = "the agent's client"

// errAnsweredInClient ends a call whose answer came in the client's form
// but could not be put in through the server (it is returned directly).
var errAnsweredInClient = errors.New("answered in the agent's client")

// offer is a request shown as a form in the agent's client while it also
// waits in the inbox. Its goroutine sets the fields before done closes.
type offer struct {
	cancel context.CancelFunc
	done   chan struct{}
	// reason is why the form is withdrawn, set by end before it closes
	// ended.
	reason string
	ended  chan struct{}

	shown     bool                // the form reached the client
	withdrawn bool                // it was still open when the call ended
	answered  bool                // the client's answer went in first
	direct    *mcp.CallToolResult // the client's answer, when it could not go in
}

// offerInClient shows the request as a form (MCP elicitation) in the
// agent's client when the client supports form elicitation and the bridge
// can put answers in (Options.Reply, or a Backend): whichever answers first, the form
// or a device of the inbox, wins through the server's first-answer-wins,
// and the other side is told (the inbox names the agent's client; the
// form is withdrawn). A declined or dismissed form leaves the request
// waiting in the inbox. When an answer typed in the form cannot be put
// in, endCall ends the call and end returns that answer itself.
//
// One form at a time per bridge: the MCP library numbers its requests to
// the client with a counter it does not expose, and withdrawing a form
// (notifications/cancelled) needs that number. The bridge sends no other
// requests to clients (no sampling, no roots, no pings: see the HTTP
// endpoint), so while it holds formSlot, its next form gets formSeq+1. A
// second call waiting meanwhile offers its form when the first one's ends.
func (b *bridge) offerInClient(ctx context.Context, kind wire.Kind, id, text string, qs []*pb.Question, endCall context.CancelCauseFunc) *offer {
	o := &offer{done: make(chan struct{}), ended: make(chan struct{})}
	srv := server.ServerFromContext(ctx)
	if !b.replies || srv == nil || !formElicitation(ctx) {
		close(o.done)
		o.cancel = func() {}
		return o
	}
	ectx, cancel := context.WithCancel(ctx)
	o.cancel = cancel
	go func() {
		defer close(o.done)
		select {
		case b.formSlot <- struct{}{}:
		case <-ectx.Done():
			return
		}
		defer func() { <-b.formSlot }()
		seq := b.formSeq + 1
		res, err := srv.RequestElicitation(ectx, formFor(kind, text, qs))
		if !notSent(err) {
			b.formSeq, o.shown = seq, true
		}
		switch {
		case err != nil && ectx.Err() != nil && o.shown:
			// The call ended first (answered in the inbox, cancelled, timed
			// out): tell the client to take its form down. The call's
			// context may be over; the notification still goes out.
			<-o.ended
			o.withdrawn = true
			nctx := context.WithoutCancel(ctx)
			written, _ := ctx.Value(writesKey{}).(func() uint64)
			var before uint64
			if written != nil {
				before = written()
			}
			if err := srv.SendNotificationToClient(nctx, string(mcp.MethodNotificationCancelled),
				map[string]any{"requestId": seq, "reason": o.reason}); err != nil {
				b.log.Debug("withdraw form", "err", err)
				break
			}
			delivered(nctx, written, before)
		case err != nil:
			b.log.Debug("form in the client", "kind", kind, "id", id, "err", err)
		case res.Action != mcp.ElicitationResponseActionAccept:
			b.log.Info("the person dismissed the form in the client; the request waits in the inbox", "kind", kind, "id", id, "action", res.Action)
			_ = logToClient(ctx, srv, "info", fmt.Sprintf("The form for %s %s was dismissed (%s); it waits in the agentassistant inbox.", kindWord(kind), id, res.Action))
		default:
			texts, refused := formAnswer(res.Content)
			if refused == nil {
				o.answered, o.direct, refused = b.answerFromClient(ctx, kind, id, texts, qs)
			}
			if refused != nil {
				_ = logToClient(ctx, srv, "warning", fmt.Sprintf("The form's answer to %s %s was not taken (%s); it waits in the agentassistant inbox.",
					kindWord(kind), id, refusal(refused)))
			}
			if o.direct != nil {
				endCall(errAnsweredInClient)
			}
		}
	}()
	return o
}

// refusal is why the server refused an answer, without the RPC's code.
func refusal(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

// answerFromClient puts the answer typed in the client's form in, as a
// device's answer, under the client's name. It reports whether it went
// in first; when it could not go in at all, it returns the answer as the
// call's result, so nothing typed is lost. One the server refuses as no
// answer to the request (not one of its options: invalid_argument) is
// neither: refused says why, and the request waits in the inbox.
func (b *bridge) answerFromClient(ctx context.Context, kind wire.Kind, id string, answer []string, qs []*pb.Question) (won bool, direct *mcp.CallToolResult, refused error) {
	nick := ClientNickname
	if name := mcpClientName(ctx); name != "" {
		nick += " (" + name + ")"
	}
	resp := &pb.AskQuestionResponse{ID: id}
	for _, t := range answer {
		resp.Contents = append(resp.Contents, &pb.McpResultContent{Type: 1, Text: &pb.TextContent{Type: "text", Text: t}})
	}
	var err error
	if kind == wire.TaskFinish {
		err = b.be.TaskFinishReply(ctx, &pb.TaskFinishReplyRequest{UserToken: b.o.Token, Nickname: nick,
			Response: &pb.TaskFinishResponse{ID: id, Contents: resp.Contents}})
	} else {
		err = b.be.AskQuestionReply(ctx, &pb.AskQuestionReplyRequest{UserToken: b.o.Token, Nickname: nick, Response: resp})
	}
	switch {
	case err == nil:
		b.log.Info("answered in the agent's client", "kind", kind, "id", id)
		return true, nil, nil
	case connect.CodeOf(err) == connect.CodeFailedPrecondition:
		// A device answered first, or the request ended: the call returns
		// that outcome.
		b.log.Info("the form's answer came second", "kind", kind, "id", id)
		return false, nil, nil
	case connect.CodeOf(err) == connect.CodeInvalidArgument:
		// Not an answer the request takes (a form submitted with no
		// option chosen where only the options are): returning it as
		// the person's would answer what the inbox still asks.
		b.log.Info("the form's answer is not one the request takes; it waits in the inbox", "kind", kind, "id", id, "err", err)
		return false, nil, err
	}
	b.log.Warn("could not put the form's answer in; returning it directly", "kind", kind, "id", id, "err", err)
	return false, toResult(kind, resp, qs), nil
}

// end withdraws the form if it is still open, waits for the offer, and
// returns the call's result: as it is, with where the person answered
// when the form lost to a device (by, from the server), or the form's
// answer when it could not go in through the server.
func (o *offer) end(res *mcp.CallToolResult, replied bool, by string) *mcp.CallToolResult {
	o.reason = "the request ended"
	if replied {
		o.reason = "answered on the phone/PC" + inParens(by)
	}
	close(o.ended)
	o.cancel()
	<-o.done
	switch {
	case o.direct != nil:
		return o.direct
	case o.withdrawn && replied && res != nil:
		res.Content = append(res.Content, mcp.NewTextContent(
			fmt.Sprintf("(The person answered on the phone/PC%s; the form shown in the MCP client was withdrawn.)", inParens(by))))
	}
	return res
}

func inParens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// formElicitation reports whether the session's client said, in its
// initialize, that it shows form elicitations (an empty elicitation
// capability means forms).
func formElicitation(ctx context.Context) bool {
	s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	if !ok {
		return false
	}
	e := s.GetClientCapabilities().Elicitation
	return e != nil && (e.Form != nil || e.URL == nil)
}

// notSent reports an elicitation error returned before a request went
// out (and before it took a number).
func notSent(err error) bool {
	return errors.Is(err, server.ErrNoActiveSession) || errors.Is(err, server.ErrElicitationNotSupported) ||
		errors.Is(err, server.ErrServerInitiatedRequestUnsupported)
}

// formFor is the form for a request: its text, the options it offers as
// an enum (an array of enums when several may be chosen), and a free
// answer field unless only the options are allowed.
func formFor(kind wire.Kind, text string, qs []*pb.Question) mcp.ElicitationRequest {
	msg := text + "\n\n(You can also answer in the agentassistant inbox on your PC or phone; the first answer counts.)"
	field := map[string]any{"type": "string", "title": "Your answer"}
	props := map[string]any{}
	required := []string{"answer"}
	if kind == wire.TaskFinish {
		msg = "The agent finished a task:\n\n" + text +
			"\n\nYour feedback or next instruction (or answer in the agentassistant inbox on your PC or phone; the first answer counts)."
		field["title"] = "Feedback or next instruction"
		required = nil
	}
	opts, multiple, custom := wire.OptionsOf(qs)
	if len(opts) > 0 {
		labels := make([]string, len(opts))
		var desc []string
		for i, o := range opts {
			labels[i] = o.GetLabel()
			if o.GetDescription() != "" {
				desc = append(desc, o.GetLabel()+": "+o.GetDescription())
			}
		}
		choice := map[string]any{"type": "string", "title": "Choose", "enum": labels}
		if multiple {
			choice = map[string]any{"type": "array", "title": "Choose one or more", "items": map[string]any{"type": "string", "enum": labels}}
		}
		if len(desc) > 0 {
			choice["description"] = strings.Join(desc, "\n")
		}
		props["choice"] = choice
		required = nil
		if !custom {
			// Only the options: one at least, as the server takes
			// nothing else.
			required = []string{"choice"}
			if multiple {
				choice["minItems"] = 1
			}
			field = nil
		} else {
			field["title"] = "Or your own answer"
		}
	}
	if field != nil {
		props["answer"] = field
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		schema["required"] = required
	}
	return mcp.ElicitationRequest{
		Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)},
		Params:  mcp.ElicitationParams{Message: msg, RequestedSchema: schema},
	}
}

// formAnswer is the texts of an accepted form: the chosen option labels,
// one text each, then what was typed. A form whose fields are not of the
// types its schema asked (a client that does not check them) is no
// answer: it would settle the request with what the person never wrote.
func formAnswer(content any) ([]string, error) {
	m, ok := content.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the form's content is %T, not an object", content)
	}
	var out []string
	switch c := m["choice"].(type) {
	case nil:
	case string:
		if c != "" {
			out = append(out, c)
		}
	case []any:
		for _, v := range c {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("a choice is %T, not text", v)
			}
			if s != "" {
				out = append(out, s)
			}
		}
	default:
		return nil, fmt.Errorf("the choice is %T, not text or a list of texts", c)
	}
	s, ok := m["answer"].(string)
	if !ok && m["answer"] != nil {
		return nil, fmt.Errorf("the answer is %T, not text", m["answer"])
	}
	if s = strings.TrimSpace(s); s != "" || len(out) == 0 {
		out = append(out, s)
	}
	return out, nil
}

// answeredBy reads who answered from a call's response headers.
func answeredBy(h http.Header) string {
	return wire.DecodeAnsweredBy(h.Get(wire.AnsweredByHeader))
}

// delivered waits, for at most a second, until the notification just
// queued for the client has been written, before the call's result is.
// Over Streamable HTTP the MCP library hands a session's notifications to
// whichever of its streams takes them first, and one taken by the stream
// of a request that is ending loses the race with that request's response
// and is dropped. A withdrawal lost so would leave the form open. So the
// call waits until the queue is empty and the transport has written
// something on the session since (written, from WithWrites; nil over
// stdio, whose one writer drops nothing).
func delivered(ctx context.Context, written func() uint64, before uint64) {
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil {
		return
	}
	q := cs.NotificationChannel()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if len(q) == 0 && (written == nil || written() > before) {
			return
		}
	}
}

// logToClient sends the client a log message (notifications/message).
func logToClient(ctx context.Context, srv *server.MCPServer, level, text string) error {
	return srv.SendNotificationToClient(ctx, "notifications/message",
		map[string]any{"level": level, "logger": "agentassistant", "data": text})
}
