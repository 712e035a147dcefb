// Package remoteinput is the PC side of remote input: a /ws client that
// logs in as a device of the token and types every chat message sent to it
// into the window that has the keyboard focus, so a person can dictate on
// the phone and have the text arrive in the agent's chat box on the PC.
//
// The protocol is the inbox's own: UserLogin with the token and a nickname
// that starts with NicknameMark, then ChatMessageNotification frames. A
// chat whose content starts with ControlPrefix is a command (undo, clear,
// enter, backspace), never text. The companion answers each message with a
// short chat back to its sender ("✓ typed 12 characters", or why not).
package remoteinput

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/protocount"
	"github.com/agentassistant/agentassistant/internal/typing"
	"github.com/agentassistant/agentassistant/internal/wire"
)

const (
	// NicknameMark starts the nickname of every input companion. /ws has
	// no field for the kind of device, so this is how the inbox knows to
	// offer "Type on …" in the chat with it.
	NicknameMark = "⌨ "

	// ControlPrefix starts a chat that is a command, not text: the
	// prefix followed by one of the Control verbs. It begins with Escape,
	// which no person can type into a chat box and which the companion
	// never types (typing.Clean drops it), so no dictation can be taken
	// for a command nor a command typed as text.
	ControlPrefix = "\x1binput:"
)

// The Control verbs.
const (
	// Undo erases the last message typed, as far back as the last Enter.
	Undo = "undo"
	// Clear erases everything typed since the last Enter.
	Clear = "clear"
	// Enter presses Enter (to send what was dictated).
	Enter = "enter"
	// Backspace presses Backspace once.
	Backspace = "backspace"
)

// Nickname returns name marked as an input companion's.
func Nickname(name string) string {
	name = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), strings.TrimSpace(NicknameMark)))
	return NicknameMark + name
}

// ErrRefused is returned by Run when the server refuses the login.
var ErrRefused = errors.New("the server refused the login")

// Options configure a Companion.
type Options struct {
	// URLs are the server's /ws endpoints, ws://host:port/ws (wss:// for
	// a server that serves HTTPS): one, or a cluster's instances, tried
	// in turn, a connection that fails or ends moving to the next.
	URLs []string
	// Token and Nickname log in; Nickname gets NicknameMark in front.
	Token, Nickname string
	// Keyboard types; required.
	Keyboard typing.Keyboard
	// Logger gets what happens (never the token, never the text typed);
	// nil discards.
	Logger *slog.Logger
	// MaxChars refuses a message longer than this many characters; 0
	// means DefaultMaxChars.
	MaxChars int
	// MinBackoff and MaxBackoff bound the wait before a reconnect, which
	// doubles from the first to the second; 0 means 1 s and 30 s.
	MinBackoff, MaxBackoff time.Duration
}

// DefaultMaxChars bounds one message: at xdotool's pace it types in about
// four minutes.
const DefaultMaxChars = 20000

const (
	queueLen  = 16               // messages waiting to be typed
	outLen    = 64               // replies waiting for the connection
	maxFrame  = 17 << 20         // the server's own frame limit, and some
	readWait  = 2 * time.Minute  // silence (no frame, no ping) that ends a connection
	writeWait = 10 * time.Second // per frame
	maxUndo   = 1000             // messages remembered for undo
)

// Companion is the listening side of remote input.
type Companion struct {
	o    Options
	log  *slog.Logger
	dial websocket.Dialer
	cmds chan command
	out  chan *pb.WebsocketMessage

	// typed holds, per message since the last Enter, how many characters
	// it put in the focused window; only the worker touches it.
	typed []int
}

// command is one thing to do: text to type, or a Control verb.
type command struct {
	from, fromNick string // the sender; "" when there is no one to answer
	text           string
	verb           string
}

// New returns a Companion; Run starts it.
func New(o Options) *Companion {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxChars <= 0 {
		o.MaxChars = DefaultMaxChars
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	o.Nickname = Nickname(o.Nickname)
	return &Companion{
		o:   o,
		log: o.Logger,
		// The server is local or on the LAN: never send the token
		// through a proxy.
		dial: websocket.Dialer{HandshakeTimeout: 10 * time.Second, Proxy: nil,
			// The token in the upgrade as well as in the login frame: the
			// server keeps a connection that presents a valid one apart
			// from strangers' waiting to log in, so no flood of theirs
			// closes it before its login. As a subprotocol, as the web UI
			// sends it (srv/auth TokenProtocol), any token fits; the
			// server selects the plain one and never sends it back, and a
			// server that knows neither ignores them.
			Subprotocols: []string{"agentassistant", "agentassistant.bearer." + base64.RawURLEncoding.EncodeToString([]byte(o.Token))}},
		cmds: make(chan command, queueLen),
		out:  make(chan *pb.WebsocketMessage, outLen),
	}
}

// Run keeps the companion logged in, reconnecting with backoff, and types
// what it is sent, until ctx ends (then it returns nil) or the server
// refuses the login (ErrRefused).
func (c *Companion) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { c.work(ctx) })

	wait := c.o.MinBackoff
	for n := 0; ; n++ {
		loggedIn, err := c.session(ctx, c.o.URLs[n%len(c.o.URLs)])
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrRefused) {
			return err
		}
		if loggedIn {
			wait = c.o.MinBackoff
		}
		c.log.Warn("not connected to the server; retrying", "err", err, "in", wait.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, c.o.MaxBackoff)
	}
}

// session is one connection: log in, then read until it breaks. It
// reports whether the login succeeded.
func (c *Companion) session(ctx context.Context, url string) (loggedIn bool, err error) {
	conn, resp, err := c.dial.DialContext(ctx, url, http.Header{})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return false, fmt.Errorf("connect to %s: %w", url, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// Closing the socket is what ends the read below when ctx ends.
	wg.Go(func() {
		<-ctx.Done()
		_ = conn.Close()
	})

	conn.SetReadLimit(maxFrame)
	_ = conn.SetReadDeadline(time.Now().Add(readWait))
	conn.SetPingHandler(func(data string) error {
		_ = conn.SetReadDeadline(time.Now().Add(readWait))
		// WriteControl may run beside the writer goroutine.
		err := conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(writeWait))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		return err
	})
	login, _ := proto.Marshal(&pb.WebsocketMessage{Cmd: wire.CmdUserLogin, StrParam: c.o.Token, Nickname: c.o.Nickname})
	_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
	if err := conn.WriteMessage(websocket.BinaryMessage, login); err != nil {
		return false, fmt.Errorf("send login: %w", err)
	}

	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return loggedIn, fmt.Errorf("read from the server: %w", err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(readWait))
		var m pb.WebsocketMessage
		// A frame of millions of empty items costs some forty times its
		// bytes decoded: counted first, and let go unread.
		if err := protocount.Check(data, m.ProtoReflect().Descriptor(), protocount.Max); err != nil {
			c.log.Warn("a frame from the server not read", "bytes", len(data), "err", err)
			continue
		}
		if err := proto.Unmarshal(data, &m); err != nil {
			c.log.Debug("undecodable frame from the server", "err", err)
			continue
		}
		switch m.Cmd {
		case wire.CmdUserLogin:
			r := m.GetUserLoginResponse()
			if r == nil {
				continue
			}
			if !r.GetSuccess() {
				return false, fmt.Errorf("%w: %s", ErrRefused, r.GetErrorMessage())
			}
			if !loggedIn {
				loggedIn = true
				// The one writer of this socket from here on.
				wg.Go(func() { c.write(ctx, conn) })
				c.log.Info("listening: chat messages sent to this device are typed into the focused window",
					"nickname", m.GetNickname(), "client", r.GetClientId(), "keyboard", c.o.Keyboard.Name())
			}
		case wire.CmdChatMessageNotification:
			c.received(m.GetChatMessageNotification().GetChatMessage())
		case wire.CmdSendBackspace:
			// Existing clients' SendBackspaceRequest (WebsocketMessage
			// field 25); the server names the sender in StrParam and
			// Nickname.
			c.enqueue(command{from: m.GetStrParam(), fromNick: m.GetNickname(), verb: Backspace})
		case wire.CmdError:
			e := m.GetError()
			c.log.Warn("the server refused a frame", "code", e.GetCode(), "message", e.GetMessage(), "cmd", e.GetCmd())
		}
	}
}

// write sends the replies while the connection lasts.
func (c *Companion) write(ctx context.Context, conn *websocket.Conn) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-c.out:
			b, err := proto.Marshal(m)
			if err != nil {
				c.log.Error("marshal a reply", "err", err)
				continue
			}
			_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
			if err := conn.WriteMessage(websocket.BinaryMessage, b); err != nil {
				c.log.Warn("reply not sent", "err", err)
				_ = conn.Close() // the reader sees it and reconnects
				return
			}
		}
	}
}

// received turns a chat message into a command and queues it.
func (c *Companion) received(msg *pb.ChatMessage) {
	if msg == nil {
		return
	}
	cmd := command{from: msg.GetSenderClientId(), fromNick: msg.GetSenderNickname()}
	if verb, ok := strings.CutPrefix(msg.GetContent(), ControlPrefix); ok {
		cmd.verb = verb
	} else {
		cmd.text = msg.GetContent()
	}
	c.enqueue(cmd)
}

func (c *Companion) enqueue(cmd command) {
	select {
	case c.cmds <- cmd:
	default:
		c.log.Warn("too much waiting to be typed; message dropped", "from", cmd.fromNick)
		c.reply(cmd.from, fmt.Sprintf("✗ not typed: %d messages are still waiting to be typed on this PC", queueLen))
	}
}

// reply queues a chat back to the sender of a command.
func (c *Companion) reply(to, text string) {
	if to == "" {
		return
	}
	select {
	case c.out <- &pb.WebsocketMessage{
		Cmd:                    wire.CmdSendChatMessage,
		SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: to, Content: text},
	}:
	default:
		c.log.Warn("reply dropped: the connection is not keeping up")
	}
}

// work types the queued commands one after another, across reconnects.
func (c *Companion) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case cmd := <-c.cmds:
			c.reply(cmd.from, c.do(ctx, cmd))
		}
	}
}

// do carries out one command and says how it went.
func (c *Companion) do(ctx context.Context, cmd command) string {
	kb := c.o.Keyboard
	switch cmd.verb {
	case "":
		text := typing.Clean(cmd.text)
		n := utf8.RuneCountInString(text)
		if n == 0 {
			return "nothing to type"
		}
		if n > c.o.MaxChars {
			c.log.Warn("message too long; not typed", "from", cmd.fromNick, "chars", n, "max", c.o.MaxChars)
			return fmt.Sprintf("✗ not typed: %d characters, more than the %d this PC types at once", n, c.o.MaxChars)
		}
		c.typed = append(c.typed, 0)
		if len(c.typed) > maxUndo {
			c.typed = c.typed[1:]
		}
		err := typing.Write(ctx, kb, text, func(s typing.Segment) {
			if s.Text == "" && s.Key == typing.Enter {
				c.typed = append(c.typed[:0], 0)
				return
			}
			c.typed[len(c.typed)-1] += s.Chars()
		})
		if last := len(c.typed) - 1; c.typed[last] == 0 {
			c.typed = c.typed[:last]
		}
		if err != nil {
			c.log.Error("could not type", "from", cmd.fromNick, "err", err)
			return "✗ could not type: " + err.Error()
		}
		c.log.Info("typed", "from", cmd.fromNick, "chars", n)
		return fmt.Sprintf("✓ typed %d characters", n)
	case Undo, Clear:
		if len(c.typed) == 0 {
			return "nothing to " + cmd.verb + ": only what this PC typed since the last Enter can be erased"
		}
		n := c.typed[len(c.typed)-1]
		c.typed = c.typed[:len(c.typed)-1]
		if cmd.verb == Clear {
			for _, k := range c.typed {
				n += k
			}
			c.typed = nil
		}
		return c.press(ctx, cmd, typing.Backspace, n, fmt.Sprintf("✓ erased %d characters", n))
	case Backspace:
		if last := len(c.typed) - 1; last >= 0 {
			if c.typed[last]--; c.typed[last] == 0 {
				c.typed = c.typed[:last]
			}
		}
		return c.press(ctx, cmd, typing.Backspace, 1, "✓ pressed Backspace")
	case Enter:
		c.typed = nil
		return c.press(ctx, cmd, typing.Enter, 1, "✓ pressed Enter")
	}
	return fmt.Sprintf("✗ unknown command %q (this PC knows %s, %s, %s and %s)", cmd.verb, Undo, Clear, Enter, Backspace)
}

func (c *Companion) press(ctx context.Context, cmd command, k typing.Key, n int, ok string) string {
	if err := c.o.Keyboard.Press(ctx, k, n); err != nil {
		// How much was erased is unknown now: never erase past it later.
		c.typed = nil
		c.log.Error("could not press "+k.String(), "from", cmd.fromNick, "err", err)
		return "✗ could not press " + k.String() + ": " + err.Error()
	}
	c.log.Info("pressed "+k.String(), "from", cmd.fromNick, "times", n)
	return ok
}
