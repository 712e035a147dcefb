//go:build linux

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// A data directory on a file system of its own, 8 MiB, filled to the
// last byte by a file of the test's: the disk full for real (ENOSPC on
// every file the server writes, its database's and journal's growth
// included), and space given back by deleting that file. A tmpfs needs
// mount(2) (root, or CAP_SYS_ADMIN); where the test may not mount one it
// is skipped (TestFullDiskRefusesQuestions covers a full disk without
// root, through RLIMIT_FSIZE, which refuses writes past a size rather
// than at the file system's end).

// smallDisk mounts a tmpfs of size for the test, or skips it.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a file into dir until its file system has no byte
// left, and returns what deletes it again.
func fillDisk(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for _, n := range []int{1024, 256, 64, 16, 1} { // the last page's bytes too
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	if err := f.Close(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// troubleLines is the log's lines at WARN or ERROR.
func troubleLines(log string) []string {
	var out []string
	for l := range strings.Lines(log) {
		if strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
			out = append(out, l)
		}
	}
	return out
}

// TestFullDiskForReal: the disk fills while a question is pending. An
// agent asking is refused at once (ResourceExhausted), a person
// answering in the app is told the answer was not saved, a reply
// through Telegram is not taken yet; the server stays up, and its log
// says so once, not at every refusal or retry. Killed and started again
// on the still full disk, the server comes up with the question still
// pending (nothing shown as answered, nothing refused shown). Once
// space is back, without a restart, the Telegram reply is taken and a
// new question is asked and answered.
func TestFullDiskForReal(t *testing.T) {
	disk := smallDisk(t, "8m")
	tg := telegramtest.Start(t, tgToken)
	port := freePort(t)
	s := startSingle(t, port, disk, telegramConfig(tg.URL))
	pc := dial(t, s, tokenA, "pc")
	agent := startMCP(t, s, tokenA)
	long := strings.Repeat("x", 40<<10) // a record no slack of the full disk holds
	done := askAsync(agent, "Deploy? "+long)
	id := must[*pb.WebsocketMessage](t)(pc.Expect("AskQuestion", 5*time.Second)).GetAskQuestionRequest().GetID()
	msg := must[int](t)(strconv.Atoi(tg.Call(t, "sendMessage", 1)["sent_message_id"]))
	waitNotedHere(t, s)

	free := fillDisk(t, disk)
	before := len(s.logw.String())
	select {
	case err := <-askRPC(s, "full-ask", "Refused? "+long):
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted || !strings.Contains(ce.Message(), "the server cannot save the request") {
			t.Fatalf("asked on a full disk: %v, want ResourceExhausted: the server cannot save the request", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a question asked on a full disk was neither refused nor answered")
	}
	for range 3 { // a person trying again and again
		if err := pc.Send(wstest.TextReply(id, "From the app")); err != nil {
			t.Fatal(err)
		}
		e := must[*pb.WebsocketMessage](t)(pc.Expect("Error", 5*time.Second)).GetError()
		if e.GetCode() != "not_saved" || !strings.Contains(e.GetMessage(), "no space left on device") {
			t.Fatalf("the answer on a full disk was met with %v", e)
		}
	}
	tg.Push(telegramtest.Reply(chat, 601, msg, "From Telegram"))
	// Telegram's update is handled again and again, refused each time.
	if !s.logw.waitCount("answer refused", 6, 30*time.Second) {
		t.Fatalf("the Telegram reply was not tried again; log:\n%s", s.logw.String()[before:])
	}
	if lines := troubleLines(s.logw.String()[before:]); len(lines) > 2 {
		t.Errorf("the full disk took %d lines of the log at WARN and above, want one or two:\n%s", len(lines), strings.Join(lines, ""))
	}
	select {
	case r := <-done:
		t.Fatalf("the agent's call ended on a full disk: %+v %v", r.r, r.err)
	default:
	}

	free()
	wantAnswer(t, done, "From Telegram") // taken once space is back, no restart
	if !s.logw.waitFor("writes again", 10*time.Second) {
		t.Errorf("the log does not say the store writes again:\n%s", s.logw.String()[before:])
	}
	pc = dial(t, s, tokenA, "pc again")
	errc := askRPC(s, "after", "Space again? "+long)
	if m := must[*pb.WebsocketMessage](t)(pc.Expect("AskQuestion", 10*time.Second)); m.GetAskQuestionRequest().GetID() != "after" {
		t.Fatalf("shown %v", m)
	}
	if err := pc.Send(wstest.TextReply("after", "Yes")); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("asked once space was back: %v", err)
	}
	for _, said := range tg.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}

	// Full again, with a question pending and an answer refused; killed
	// and started on the full disk: it starts, or says what to do.
	askRPC(s, "kept", "Still pending? "+long)
	must[*pb.WebsocketMessage](t)(pc.Expect("AskQuestion", 10*time.Second))
	free = fillDisk(t, disk)
	if err := pc.Send(wstest.TextReply("kept", "Not saved")); err != nil {
		t.Fatal(err)
	}
	if e := must[*pb.WebsocketMessage](t)(pc.Expect("Error", 5*time.Second)).GetError(); e.GetCode() != "not_saved" {
		t.Fatalf("the answer on a full disk was met with %v", e)
	}
	s.kill9(t)
	out, started := tryStart(t, port, disk)
	t.Logf("started on the full disk: %v\n%s", started, out)
	if !started && !strings.Contains(out, "free space in "+disk) {
		t.Fatalf("started on a full disk, the server stopped without saying what to do:\n%s", out)
	}
	free()
	s = startSingle(t, port, disk, telegramConfig(tg.URL))
	if got := pendingIDs(t, s); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("pending after a kill -9 on a full disk: %v, want only the one whose answer was refused", got)
	}
}

// tryStart runs agentassistant-srv on port over data and reports
// whether it started (it is then stopped again) or, if not, what it
// said before it stopped.
func tryStart(t *testing.T, port, data string) (string, bool) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "agentassistant-srv"), "-port", port, "-data", data,
		"-config", filepath.Join(data, "channels.toml"), "-token", tokenA)
	var out lockedWriter
	out.b = new(strings.Builder)
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	listening := make(chan bool, 1)
	go func() { listening <- out.waitFor("msg=listening", 30*time.Second) }()
	select {
	case <-exited:
		return out.String(), false
	case ok := <-listening:
		if !ok {
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("the server neither started nor stopped on a full disk:\n%s", out.String())
		}
		_ = cmd.Process.Signal(os.Interrupt)
		<-exited
		return out.String(), true
	}
}

// natsOn runs a nats-server with JetStream storing in dir on port, until
// the test ends or stop is called.
func natsOn(t *testing.T, port, dir string) (stop func()) {
	t.Helper()
	cmd := exec.Command(natsServerBin(t), "-a", "127.0.0.1", "-p", port, "-js", "-sd", dir)
	var b strings.Builder
	lw := &lockedWriter{b: &b}
	cmd.Stdout, cmd.Stderr = lw, lw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	if !lw.waitFor("Server is ready", 10*time.Second) {
		t.Fatalf("nats-server did not start:\n%s", lw.String())
	}
	return stop
}

// TestClusterNATSDiskFull: the disk under NATS's JetStream fills while
// an instance serves. NATS takes no write to the requests' stream from
// then on (its file store keeps the write error until it restarts). An
// agent asking is refused with a message that says NATS is connected
// and may be out of storage, not only that it is unreachable; once
// space is back and NATS restarted, the same instance, not restarted,
// asks and answers again.
func TestClusterNATSDiskFull(t *testing.T) {
	disk := smallDisk(t, "100m")
	port := freePort(t)
	stop := natsOn(t, port, disk)
	s := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", "nats://127.0.0.1:" + port, "-instance", "a"}, tokenA)
	pc := dial(t, s, tokenA, "pc")
	free := fillDisk(t, disk)
	long := strings.Repeat("x", 40<<10)
	select {
	case err := <-askRPC(s, "full", "Refused? "+long):
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable || !strings.Contains(ce.Message(), "storage full") {
			t.Fatalf("asked while NATS's disk is full: %v, want Unavailable saying its storage may be full", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a question asked while NATS's disk is full was neither refused nor shown")
	}
	free()
	stop()
	natsOn(t, port, disk)
	// The instance reconnects; agentassistant-mcp asks again until
	// NATS takes it.
	done := askAsync(startMCP(t, s, tokenA), "Space again?")
	m := must[*pb.WebsocketMessage](t)(pc.Expect("AskQuestion", 45*time.Second))
	if err := pc.Send(wstest.TextReply(m.GetAskQuestionRequest().GetID(), "Yes")); err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, done, "Yes")
}
