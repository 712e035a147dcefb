package mcpbridge

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

func (b *bridge) register(s *server.MCPServer) {
	timeoutOpt := mcp.WithNumber("timeout",
		mcp.Description(fmt.Sprintf("Seconds to wait for the person (default %d, allowed %d to %d). Leave it out unless you have a reason.",
			int(defaultTimeout.Seconds()), int(minTimeout.Seconds()), int(maxTimeout.Seconds()))),
	)
	dirOpt := mcp.WithString("project_directory",
		mcp.Description("Absolute path of the project you are working in, so the person knows which agent is asking."),
	)
	agentOpt := mcp.WithString("agent_name",
		mcp.Description("Your name as an agent or the tool you run in (e.g. Claude Code, Cursor, Cascade); shown to the person."),
	)
	modelOpt := mcp.WithString("reasoning_model_name",
		mcp.Description("The model you run on (e.g. claude-sonnet-4, gpt-5); shown to the person."),
	)
	// Every tool asks the same way: where, how long, who, and what the
	// person may choose; the answer has one shape.
	common := append([]mcp.ToolOption{dirOpt, timeoutOpt, agentOpt, modelOpt}, choiceOpts()...)
	common = append(common,
		mcp.WithRawOutputSchema(answerSchema),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(true),
	)
	tool := func(name, title, desc string, text mcp.ToolOption) mcp.Tool {
		return mcp.NewTool(name, append([]mcp.ToolOption{mcp.WithDescription(desc), text, mcp.WithTitleAnnotation(title)}, common...)...)
	}
	addStrict(s, tool("ask_question", "Ask the user",
		"Ask the person you work for a question and wait for their answer. "+
			"Use it when you need a decision, a clarification, a preference, credentials or any information you cannot find yourself, "+
			"rather than guessing or stopping. Markdown is rendered. An image shows only as a data: URL (base64); one at a web address "+
			"is shown as a link the person may open (never loaded on its own), any other as a note that an image was left out. "+
			"Offer options when the answer is one of a few choices: "+
			"the person answers in one tap. The answer may contain the chosen options, text and images.",
		mcp.WithString("question", mcp.Required(),
			mcp.Description("The question, in markdown. Make it self-contained: give the context and the options you see."))),
		b.ask(wire.AskQuestion, "ask_question", "question"))
	summaryOpt := mcp.WithString("summary", mcp.Required(),
		mcp.Description("What you did and its result, in markdown: changes made, how it was checked, anything left open."))
	addStrict(s, tool("task_finish", "Report the finished task",
		"Report to the person you work for that you have finished the task, and wait for their feedback: "+
			"they may confirm, ask for changes or give the next task. Call it once the work is done, with a summary of what you did. "+
			"You may offer options for the next step (e.g. \"Continue\", \"Stop\", \"Run the tests again\").",
		summaryOpt), b.ask(wire.TaskFinish, "task_finish", "summary"))
	// The name the existing agentassistant's current rules give agents
	// ("call work_report before you finish"): agents set up with them
	// work unchanged. The same arguments, the same report.
	addStrict(s, tool("work_report", "Report the work",
		"Before you finish a task, send the person you work for a report of your work and wait for their "+
			"confirmation or feedback: they may approve, ask for changes or give the next task. The same as task_finish.",
		summaryOpt), b.ask(wire.TaskFinish, "work_report", "summary"))
}

// ask is the handler of tool, which asks (kind) with the text of its
// argument arg: a question, or a task report's summary.
func (b *bridge) ask(kind wire.Kind, tool, arg string) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		text, err := textArg(req, arg)
		if err != nil {
			return badArgs(tool, err)
		}
		if strings.TrimSpace(text) == "" {
			return mcp.NewToolResultError(tool + " needs a non-empty \"" + arg + "\"."), nil
		}
		qs, err := questionsArg(req, text)
		if err != nil {
			return badArgs(tool, err)
		}
		secs, err := secondsArg(req, "timeout", fmt.Sprintf("(%d to %d), e.g. 300",
			int(minTimeout.Seconds()), int(maxTimeout.Seconds())))
		if err != nil {
			return badArgs(tool, err)
		}
		timeout := callTimeout(secs)
		var who [3]string // project_directory, agent_name, reasoning_model_name
		for i, name := range []string{"project_directory", "agent_name", "reasoning_model_name"} {
			if who[i], err = textArg(req, name); err != nil {
				return badArgs(tool, err)
			}
		}
		dir := cmp.Or(who[0], b.o.ProjectDirectory)
		if res := b.handOver(ctx, kind, tool, dir); res != nil {
			return res, nil
		}
		id, asked := requestOf(ctx)
		agent, model, client := who[1], who[2], mcpClientName(ctx)
		// Each try asks with the time left: a request the server no
		// longer has (NATS lost its storage) is made again with the
		// deadline the agent was given, not a fresh one.
		due := time.Now().Add(timeout)
		var call func(context.Context) (*pb.AskQuestionResponse, string, error)
		if kind == wire.AskQuestion {
			q := &pb.AskQuestionRequest{ID: id, UserToken: b.o.Token, Request: &pb.McpAskQuestionRequest{
				ProjectDirectory: dir, Question: text,
				AgentName: agent, ReasoningModelName: model, McpClientName: client, Questions: qs,
			}}
			call = func(ctx context.Context) (*pb.AskQuestionResponse, string, error) {
				q.Request.Timeout = secondsLeft(due)
				return b.be.AskQuestion(ctx, q)
			}
		} else {
			r := &pb.WorkReportRequest{ID: id, UserToken: b.o.Token, Request: &pb.McpWorkReportRequest{
				ProjectDirectory: dir, Summary: text,
				AgentName: agent, ReasoningModelName: model, McpClientName: client, Questions: qs,
			}}
			call = func(ctx context.Context) (*pb.AskQuestionResponse, string, error) {
				r.Request.Timeout = secondsLeft(due)
				return b.be.TaskReport(ctx, r)
			}
		}
		if asked != nil {
			asked(kind, wire.Digest(kind, dir, text), timeout)
		}
		return b.waitAndOffer(ctx, req, kind, id, text, qs, timeout, call)
	}
}

// secondsLeft is the time until due in whole seconds, rounded up, and at
// least one: a request's Timeout of 0 would be the server's default.
func secondsLeft(due time.Time) int32 {
	return wire.Seconds(max(time.Until(due)+time.Second-1, time.Second))
}

// waitAndOffer waits for the request (wait) while it is also offered as a
// form in the agent's client (offerInClient), and returns the outcome.
func (b *bridge) waitAndOffer(ctx context.Context, req mcp.CallToolRequest, kind wire.Kind, id, text string, qs []*pb.Question, timeout time.Duration,
	call func(context.Context) (*pb.AskQuestionResponse, string, error)) (*mcp.CallToolResult, error) {
	wctx, endCall := context.WithCancelCause(ctx)
	defer endCall(nil)
	form := b.offerInClient(ctx, kind, id, text, qs, endCall)
	var by string
	replied := false
	res, err := b.wait(wctx, req, kind, id, qs, timeout, func(ctx context.Context) (*pb.AskQuestionResponse, error) {
		resp, who, err := call(ctx)
		// Upstream's server ends a call with an outcome as a response
		// (no device, a timeout): that is no one's answer.
		if err == nil && outcomeError(resp) == nil {
			replied, by = true, who
		}
		return resp, err
	})
	return form.end(res, replied, by), err
}

// mcpClientName is the name the MCP client gave in its initialize request.
func mcpClientName(ctx context.Context) string {
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		return s.GetClientInfo().Name
	}
	return ""
}

// wait makes the call, sending progress while it is open, and turns every
// outcome into text the agent can act on.
//
// If the server goes away mid-call (restarted, cleanly or not; link cut),
// the call is made again with the same request ID, with backoff, until the
// request's own deadline: the server re-attaches it to the pending request,
// or hands over the answer given meanwhile, so the tool call does not fail.
// A server never reached is reported after FirstContact. When the MCP
// client cancels, the request is withdrawn explicitly; when the MCP
// session ends (Options.Done), it is left pending for the next
// agentassistant-mcp of the project. While the client's link is down
// (WithLink), the call waits for it, not on the server, and re-attaches
// once it is back.
func (b *bridge) wait(ctx context.Context, req mcp.CallToolRequest, kind wire.Kind, id string, qs []*pb.Question, timeout time.Duration,
	call func(context.Context) (*pb.AskQuestionResponse, error)) (*mcp.CallToolResult, error) {
	return b.waitFor(ctx, req, kind, id, func() []*pb.Question { return qs }, timeout, call)
}

// waitFor is wait for a call that learns the request's choices (qs) only
// from its answer (Server.Resume).
func (b *bridge) waitFor(ctx context.Context, req mcp.CallToolRequest, kind wire.Kind, id string, qs func() []*pb.Question, timeout time.Duration,
	call func(context.Context) (*pb.AskQuestionResponse, error)) (*mcp.CallToolResult, error) {
	stop := b.progress(ctx, req, timeout)
	defer stop()
	b.track(id, true)
	defer b.track(id, false)
	start := time.Now()
	// The request's deadline is the server's: it says when no one
	// answered. The call's own deadline, a little later, only guards
	// against a server that never answers.
	due := start.Add(timeout)
	cctx, cancel := context.WithDeadline(ctx, due.Add(30*time.Second))
	defer cancel()
	delay := b.o.Reconnect
	reached := false
	var lostAt time.Time // when a reached server went away
	var lostErr error
	for {
		if !linkUp(ctx) {
			return mcp.NewToolResultError(b.cancelled(ctx, kind, id, time.Since(start))), nil
		}
		actx, stall := context.WithCancelCause(cctx)
		stopWatch := b.watchStall(actx, stall)
		stopLink := watchLink(ctx, stall)
		resp, err := call(actx)
		stopWatch()
		stopLink()
		stalled := errors.Is(context.Cause(actx), errStalled) && ctx.Err() == nil
		detached := err != nil && errors.Is(context.Cause(actx), errDetached) && ctx.Err() == nil
		stall(nil)
		if detached {
			// The client is away: the request stays pending (or its
			// answer kept) on the server until the client is back and the
			// loop's next turn re-attaches to it.
			b.log.Info("the MCP client's connection is down; the call re-attaches when it is back", "kind", kind, "id", id)
			// Meanwhile the call does not hold its request: an answer
			// given now is handed to the project's next call, should the
			// client come back as a new session instead.
			b.track(id, false)
			if !linkUp(ctx) {
				return mcp.NewToolResultError(b.cancelled(ctx, kind, id, time.Since(start))), nil
			}
			b.track(id, true)
			continue
		}
		if stalled {
			// Again at once, through the next server: the answer may be
			// waiting there already.
			b.log.Info("re-attaching after the server stalled", "kind", kind, "id", id)
			reached, lostAt, lostErr, delay = true, time.Now(), errStalled, b.o.Reconnect
			continue
		}
		if err == nil {
			// Upstream's server tells some ends as a response: final.
			if told := outcomeError(resp); told != nil {
				if ctx.Err() != nil {
					return mcp.NewToolResultError(b.cancelled(ctx, kind, id, time.Since(start))), nil
				}
				b.log.Info("call ended without an answer", "kind", kind, "err", told)
				return mcp.NewToolResultError(b.explain(kind, timeout, told)), nil
			}
			b.log.Info("answered", "kind", kind, "after", time.Since(start).Round(time.Millisecond))
			return toResult(kind, resp, qs()), nil
		}
		if ctx.Err() != nil {
			return mcp.NewToolResultError(b.cancelled(ctx, kind, id, time.Since(start))), nil
		}
		if cctx.Err() != nil {
			// The guard, past the request's deadline: whatever the
			// server ended the call with (a request made again with a
			// fresh timeout once NATS lost its storage outlasts it), its
			// time is up; the server times the request out itself.
			b.log.Info("call ended without an answer: past its deadline", "kind", kind, "id", id, "err", err)
			return mcp.NewToolResultError(b.explain(kind, timeout, connect.NewError(connect.CodeDeadlineExceeded, err))), nil
		}
		if !b.retryable(err) {
			b.log.Info("call ended without an answer", "kind", kind, "err", err)
			return mcp.NewToolResultError(b.explain(kind, timeout, err)), nil
		}
		if !isDialError(err) {
			// The server was there (it answered, or the link broke
			// mid-call): it went away now, and a fresh loss starts the
			// backoff afresh.
			reached, lostAt, lostErr, delay = true, time.Now(), err, b.o.Reconnect
		}
		limit := due
		if !reached {
			limit = start.Add(b.o.FirstContact)
		}
		now := time.Now()
		if !now.Before(limit) {
			b.log.Info("call ended without an answer", "kind", kind, "err", err)
			return mcp.NewToolResultError(b.gaveUp(kind, timeout, now.Sub(start), lostAt, lostErr, err)), nil
		}
		b.log.Warn("server unreachable mid-call; will re-attach", "kind", kind, "id", id, "retry_in", delay, "err", err)
		select {
		case <-time.After(min(delay, limit.Sub(now))): // the last try is at the limit itself
		case <-ctx.Done():
			return mcp.NewToolResultError(b.cancelled(ctx, kind, id, time.Since(start))), nil
		}
		delay = min(delay*2, maxReconnect)
	}
}

// retryable reports an error after which the request may still be
// pending: the network failed, or the server said it cannot serve it now
// (Unavailable: a server shutting down, which keeps the request, or a
// cluster's instance that lost NATS, which never saved it).
func (b *bridge) retryable(err error) bool {
	if connect.CodeOf(err) == connect.CodeUnavailable {
		return true
	}
	// Connect reports a reset link as "canceled", which is not a
	// withdrawal; a server's own Canceled is.
	return !b.fromServer(err) && (isConnError(err) || connect.CodeOf(err) == connect.CodeCanceled)
}

// fromServer reports an error the server itself gave, as opposed to
// one a Connect client made up from a broken link; in process there is
// no link.
func (b *bridge) fromServer(err error) bool {
	return !b.linked || serverAnswered(err)
}

// cancelled ends a call whose MCP request ended: withdrawn when the client
// cancelled it, left pending when the whole session is ending (the client
// is restarting agentassistant-mcp), so the person can still answer and
// the next agentassistant-mcp of the project gets the answer.
func (b *bridge) cancelled(ctx context.Context, kind wire.Kind, id string, waited time.Duration) string {
	if what, ok := b.sessionEnded(ctx); ok {
		b.log.Info("MCP session ended; the request stays pending for the next call from this project", "kind", kind, "id", id)
		return fmt.Sprintf("%s after %s; the %s stays on the person's screens and their answer is kept for the next call from this project.",
			what, waited.Round(time.Second), kindWord(kind))
	}
	b.withdraw(id)
	return fmt.Sprintf("The call was cancelled after %s; the %s was withdrawn from the person's screens.", waited.Round(time.Second), kindWord(kind))
}

// gaveUp says why a call that kept failing to reach the server ended: a
// server never reached within FirstContact, or one that went away at
// lostAt (lostErr) and was not back by the request's deadline.
func (b *bridge) gaveUp(kind wire.Kind, timeout, waited time.Duration, lostAt time.Time, lostErr, last error) string {
	what := kindWord(kind)
	if lostAt.IsZero() {
		return fmt.Sprintf("Could not reach agentassistant-srv at %s (%s; tried for %s). The person has not seen the %s. "+
			"Ask them to start agentassistant-srv, then try again.", b.o.ServerURL, rootCause(last), waited.Round(time.Second), what)
	}
	return fmt.Sprintf("Lost agentassistant-srv at %s %s ago (%s) and it was not back within the %s's %d-second timeout (last try: %s), "+
		"so no answer can arrive through this call. If the person answered meanwhile, the answer is kept: "+
		"your next ask_question or task_finish from this project gets it.",
		b.o.ServerURL, time.Since(lostAt).Round(time.Second), b.lossCause(lostErr), what, int(timeout.Seconds()), rootCause(last))
}

// lossCause is what a lost server said, or what broke the link.
func (b *bridge) lossCause(err error) string {
	if b.fromServer(err) {
		return connectMessage(err)
	}
	return rootCause(err)
}

// track records the requests this process waits on now: the answers kept
// for absent agents must not include them (they come by re-attaching).
func (b *bridge) track(id string, waiting bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if waiting {
		b.waiting[id] = struct{}{}
	} else {
		delete(b.waiting, id)
	}
}

func kindWord(k wire.Kind) string {
	if k == wire.TaskFinish {
		return "task report"
	}
	return "question"
}

// withdraw tells the server the agent no longer waits, so the question
// leaves the person's screens at once. Best effort: if it fails, the
// server withdraws it after its orphan grace.
func (b *bridge) withdraw(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := b.be.CancelRequest(ctx, &pb.CancelRequestRequest{UserToken: b.o.Token, ID: id}); err != nil {
		b.log.Debug("withdraw request", "id", id, "err", err)
	}
}

// errNoClients: the server had no device of the person to show the
// request to (upstream's server says so; ours keeps the request pending).
var errNoClients = errors.New("no device of the person is connected")

// outcomeError reads the errors upstream's agentassistant-srv gives as a
// response (is_error, meta "error" and "message", no contents) as the
// errors our server gives for the same outcome; nil for an answer. Such
// a response ends the call: it is never retried.
func outcomeError(r *pb.AskQuestionResponse) error {
	code := r.GetMeta()["error"]
	if !r.GetIsError() || len(r.GetContents()) > 0 || code == "" {
		return nil
	}
	msg := r.GetMeta()["message"]
	switch code {
	case "timeout":
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New(msg))
	case "cancelled":
		return connect.NewError(connect.CodeCanceled, errors.New(msg))
	case "no_clients":
		return errNoClients
	case "invalid_request":
		return connect.NewError(connect.CodeInvalidArgument, errors.New(msg))
	}
	return connect.NewError(connect.CodeUnknown, fmt.Errorf("%s: %s", code, msg))
}

// explain turns an error the call cannot recover from into text for the
// agent.
func (b *bridge) explain(kind wire.Kind, timeout time.Duration, err error) string {
	what := kindWord(kind)
	if errors.Is(err, errNoClients) {
		return fmt.Sprintf("No device of the person is connected to agentassistant-srv at %s, so no one saw the %s. "+
			"Ask them to open the agentassistant web UI or app with their token, then try again; "+
			"meanwhile continue with your best judgement where that is safe.", b.o.ServerURL, what)
	}
	switch connect.CodeOf(err) {
	case connect.CodeDeadlineExceeded:
		return fmt.Sprintf("No one answered the %s within %d seconds, so it was withdrawn. "+
			"The person may be away: continue with your best judgement where that is safe, or ask again later.", what, int(timeout.Seconds()))
	case connect.CodeUnauthenticated:
		return fmt.Sprintf("agentassistant-srv at %s rejected the token. Set agentassistant_server_token (or -token) "+
			"in agentassistant-mcp's configuration to the server's token.", b.o.ServerURL)
	case connect.CodeCanceled:
		return fmt.Sprintf("The %s was withdrawn before anyone answered it (cancelled, or its agent went away for too long).", what)
	case connect.CodeInvalidArgument:
		return fmt.Sprintf("agentassistant-srv refused the %s: %s", what, connectMessage(err))
	case connect.CodeNotFound:
		// A resumed call (Server.Resume) whose request the server does
		// not know: never saved, or its outcome no longer kept.
		return fmt.Sprintf("agentassistant-srv no longer knows the %s this call asked, so its outcome cannot be told here. "+
			"If you still need it, call the tool again.", what)
	}
	return fmt.Sprintf("The %s failed: agentassistant-srv at %s answered %s: %s", what, b.o.ServerURL, connect.CodeOf(err), connectMessage(err))
}

func connectMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Message() != "" {
		return ce.Message()
	}
	return err.Error()
}

// serverAnswered reports an error the server itself sent (as opposed to one
// the client made up from a broken connection).
func serverAnswered(err error) bool {
	var ce *connect.Error
	return errors.As(err, &ce) && ce.Meta().Get("Content-Type") != ""
}

// dialErrors are the messages of a request that never left: the server
// could not be connected to at all.
var dialErrors = []string{"connection refused", "no such host", "dial tcp", "network is unreachable"}

// isDialError reports that the request never left.
func isDialError(err error) bool {
	return slices.ContainsFunc(dialErrors, func(m string) bool { return strings.Contains(err.Error(), m) })
}

// isConnError reports a failure to reach the server at all, as opposed
// to an error the server answered with.
func isConnError(err error) bool {
	return !serverAnswered(err) && (isDialError(err) ||
		slices.ContainsFunc([]string{"connection reset", "EOF", "i/o timeout"}, func(m string) bool { return strings.Contains(err.Error(), m) }))
}

func rootCause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// toResult turns a person's reply into MCP content: text as text, images
// as images; with the options the request offered (qs), a text naming
// an option's label is a choice, told first in words, and the structured
// content says which were chosen and what was typed besides.
func toResult(kind wire.Kind, r *pb.AskQuestionResponse, qs []*pb.Question) *mcp.CallToolResult {
	left := maxAnswerImages
	return toResultWithin(kind, r, qs, &left)
}

// toResultWithin is toResult handing over at most *left images, and
// takes those it hands over from *left: answers handed over together
// share maxAnswerImages.
func toResultWithin(kind wire.Kind, r *pb.AskQuestionResponse, qs []*pb.Question, left *int) *mcp.CallToolResult {
	res := &mcp.CallToolResult{IsError: r.GetIsError()}
	opts, _, _ := wire.OptionsOf(qs)
	var texts []string
	for _, c := range r.GetContents() {
		if t := c.GetText().GetText(); t != "" {
			texts = append(texts, t)
		}
	}
	chosen, free := wire.Chosen(opts, texts)
	if len(chosen) > 0 {
		res.Content = append(res.Content, mcp.NewTextContent(chosenText(chosen)))
	}
	// The rest in the order given: a text that names options ("stop",
	// "Continue, Stop" typed in a reply) is told above, as the labels.
	typed := make(map[string]bool, len(free))
	for _, t := range free {
		typed[t] = true
	}
	// images counts those handed over; over, those past the bound, which
	// are not read at all.
	images, over := 0, 0
	// room takes one image from *left, or counts it over.
	room := func() bool {
		if *left <= 0 {
			over++
			return false
		}
		*left--
		return true
	}
	for _, c := range r.GetContents() {
		switch {
		case c.GetText() != nil || c.GetType() == 1:
			if t := c.GetText().GetText(); typed[t] {
				res.Content = append(res.Content, mcp.NewTextContent(t))
			}
		case c.GetImage() != nil || c.GetType() == 2:
			if im := c.GetImage(); im.GetData() != "" && room() {
				shown, ok := imageOf(im)
				res.Content = append(res.Content, shown)
				if ok {
					images++
				}
			}
		case c.GetAudio() != nil || c.GetType() == 3:
			if a := c.GetAudio(); a.GetData() != "" {
				res.Content = append(res.Content, mcp.NewAudioContent(a.GetData(), cmp.Or(a.GetMimeType(), "audio/wav")))
			}
		case c.GetEmbeddedResource() != nil || c.GetType() == 4:
			if e := c.GetEmbeddedResource(); e != nil && (!slices.Contains(readImages, e.GetMimeType()) || room()) {
				res.Content = append(res.Content, embedded(e))
			}
		}
	}
	if over > 0 {
		res.Content = append(res.Content, mcp.NewTextContent(fmt.Sprintf(
			"The person attached %d more images, left out: at most %d are handed over at once. Ask for the ones you need if these do not show it.", over, maxAnswerImages)))
	}
	if len(res.Content) == 0 {
		msg := "The person answered with an empty reply."
		if kind == wire.TaskFinish {
			msg = "The person acknowledged the task report without further instructions."
		}
		res.Content = append(res.Content, mcp.NewTextContent(msg))
	}
	if !res.IsError {
		res.StructuredContent = answer{Answered: true, Chosen: append([]string{}, chosen...), Text: strings.Join(free, "\n\n"), Images: images}
	}
	return res
}

// maxAnswerImages bounds the images of one answer handed to the agent
// (those it attached as files declared as images included): a model's
// API refuses a request of more than a hundred images, some clients of
// more than twenty, and the agent's every turn that still holds them
// fails. Those past it are not decoded either: an answer of a few
// hundred large pictures, small once compressed, took minutes to fit.
const maxAnswerImages = 20

// readImages are the image types an agent's model reads: those every
// vision API takes. One of another type, or declared as another than
// its data's, is refused by the model, and fails the agent's every turn
// that still holds it.
var readImages = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// imageOf is an answer's image as the agent is handed it: typed as its
// data is, when that is one of readImages, and fit for its model (ok);
// else a line saying it was left out, and why.
func imageOf(im *pb.ImageContent) (c mcp.Content, ok bool) {
	data, err := base64.StdEncoding.DecodeString(im.GetData())
	mime := readAs(data)
	if err != nil || mime == "" {
		return leftOut(fmt.Sprintf("it came as %q, and is no PNG, JPEG, GIF or WebP image", wire.Clip(cmp.Or(im.GetMimeType(), "no type"), 64))), false
	}
	fitted, mime, err := fit(data, mime)
	if err != nil {
		return leftOut(err.Error()), false
	}
	if fitted == nil {
		return mcp.NewImageContent(im.GetData(), mime), true
	}
	return mcp.NewImageContent(base64.StdEncoding.EncodeToString(fitted), mime), true
}

// leftOut tells the agent of an image it is not handed, and why.
func leftOut(why string) mcp.Content {
	return mcp.NewTextContent("The person attached an image that is left out: " + why + ".")
}

// readAs is the one of readImages data is, or "" when it is none.
func readAs(data []byte) string {
	if mime := http.DetectContentType(data); slices.Contains(readImages, mime) {
		return mime
	}
	return ""
}

// embedded is a file of an answer as the agent is handed it. One
// declared as an image a model reads (the existing agentassistant's
// Flutter app sends its images so) is typed as its bytes are: a client
// that hands the model such a file as an image, as Claude Code does,
// would otherwise hand it one the model's API refuses.
func embedded(e *pb.EmbeddedResource) mcp.Content {
	mime := cmp.Or(e.GetMimeType(), "application/octet-stream")
	if strings.HasPrefix(mime, "text/") || mime == "application/json" {
		return mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: e.GetUri(), MIMEType: mime, Text: string(e.GetData())})
	}
	data := e.GetData()
	if slices.Contains(readImages, mime) {
		fitted, as, err := fit(data, readAs(data))
		if err != nil {
			as = "application/octet-stream"
		} else if fitted != nil {
			data = fitted
		}
		mime = as
	}
	return mcp.NewEmbeddedResource(mcp.BlobResourceContents{URI: e.GetUri(), MIMEType: mime, Blob: base64.StdEncoding.EncodeToString(data)})
}

// badArgs is the tool result for arguments the tool refuses: a tool
// error the agent reads (the call itself succeeded).
func badArgs(tool string, err error) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultError(tool + ": " + err.Error() + "."), nil
}
