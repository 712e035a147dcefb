package channel

import (
	"context"
	"fmt"
	"image/color"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestSlackSlowDownloadHoldsNoOtherEvent: a thread reply whose image
// Slack's file host is slow to serve (up to the download's 30 s) does not
// hold up a press on another question meanwhile: that answer is saved
// while the download still waits, and the reply's answer, image and all,
// once the file comes.
func TestSlackSlowDownloadHoldsNoOtherEvent(t *testing.T) {
	const botToken, appToken = "xoxb-17-secret-bot-token", "xapp-17-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	const dm = "D42"

	free := f.askText(tokA, "q-1", "What breaks?", nil)
	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	chosen := f.askChoices(tokA, "q-2")
	sent := api.Call(t, "chat.postMessage", 2)
	ts2 := sent["_ts"]
	for _, k := range []slackKey{{dm, ts}, {dm, ts2}} {
		eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), k); return ok })
	}
	blocks, err := slacktest.BlocksOf(sent)
	if err != nil {
		t.Fatal(err)
	}

	arrived, release := api.HoldFiles()
	defer release()
	shot := pngOf(t, color.RGBA{B: 200, A: 255})
	reply := slacktest.FileReply("U42", dm, ts, "See this", api.AddFile("F1", "shot.png", "image/png", shot))
	acked := make(chan error, 1)
	go func() { acked <- api.Send(t.Context(), "events_api", reply) }() // acknowledged once answered
	within(t, "download of the reply's file", arrived)
	api.Envelope(t, "interactive", slacktest.Press("U42", dm, ts2, blocks[1].Elements[3].Value))
	if rep := answer(t, chosen); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it" {
		t.Fatalf("the press answered %+v", rep)
	}
	release()
	if err := within(t, "the reply's acknowledgement", acked); err != nil {
		t.Error(err)
	}
	rep := answer(t, free)
	if types, _ := imagesOf(t, rep.Contents); rep.Contents[0].GetText().GetText() != "See this" || len(types) != 1 {
		t.Errorf("the reply answered %+v", rep)
	}
}

// TestSlackOneQuestionInOrder: the events of one question are taken in
// the order Slack sent them, a slow one too: a thread reply whose image
// is slow to download, then a press on the same message; the reply came
// first, so the reply answers, and the press finds it answered.
func TestSlackOneQuestionInOrder(t *testing.T) {
	api, chosen, press, replyAcked, release := slowReplyThenPress(t, "18", 0)
	pressAcked := make(chan error, 1)
	go func() { pressAcked <- api.Send(t.Context(), "interactive", press) }()
	if err := api.Sent(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	release()
	rep := answer(t, chosen)
	if rep == nil || rep.Contents[0].GetText().GetText() != "Ship it" {
		t.Errorf("the question was answered %+v, want the reply that came first", rep)
	}
	for _, acked := range []chan error{replyAcked, pressAcked} {
		if err := within(t, "an acknowledgement", acked); err != nil {
			t.Error(err)
		}
	}
}

// slowReplyThenPress asks a question with choices through Slack (its
// ackWithin as given, 0 for its default) and sends a thread reply "Ship
// it" to its message, whose image Slack's file host holds: the reply's
// acknowledgement comes to replyAcked, release lets the download go.
// press is a press of one of its options, not sent.
func slowReplyThenPress(t *testing.T, n string, ackWithin time.Duration) (api *slacktest.API, chosen chan *hub.Reply, press map[string]any, replyAcked chan error, release func()) {
	t.Helper()
	botToken, appToken := "xoxb-"+n+"-secret-bot-token", "xapp-"+n+"-A1-secret-app-token"
	api = slacktest.Start(t, botToken, appToken)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL(), ackWithin: ackWithin}
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	const dm = "D42"

	chosen = f.askChoices(tokA, "q-1")
	sent := api.Call(t, "chat.postMessage", 1)
	ts := sent["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts}); return ok })
	blocks, err := slacktest.BlocksOf(sent)
	if err != nil {
		t.Fatal(err)
	}
	arrived, release := api.HoldFiles()
	t.Cleanup(release)
	reply := slacktest.FileReply("U42", dm, ts, "Ship it", api.AddFile("F1", "shot.png", "image/png", pngOf(t, color.White)))
	replyAcked = make(chan error, 1)
	go func() { replyAcked <- api.Send(t.Context(), "events_api", reply) }()
	within(t, "download of the reply's file", arrived)
	return api, chosen, slacktest.Press("U42", dm, ts, blocks[1].Elements[1].Value), replyAcked, release
}

// TestSlackPressBehindASlowReplyIsAcknowledged: a press on a message
// whose thread reply is being handled (its image slow to download)
// waits its turn, and its envelope is acknowledged within ackWithin all
// the same, as any press's: past 3 s Slack shows the person an error.
// The reply, first, answers; the press finds the question answered.
func TestSlackPressBehindASlowReplyIsAcknowledged(t *testing.T) {
	api, chosen, press, replyAcked, release := slowReplyThenPress(t, "19", 50*time.Millisecond)
	pressAcked := make(chan error, 1)
	go func() { pressAcked <- api.Send(t.Context(), "interactive", press) }()
	if err := within(t, "the press's acknowledgement while the reply downloads", pressAcked); err != nil {
		t.Error(err)
	}
	release()
	if rep := answer(t, chosen); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it" {
		t.Errorf("the question was answered %+v, want the reply that came first", rep)
	}
	if err := within(t, "the reply's acknowledgement", replyAcked); err != nil {
		t.Error(err)
	}
}

// TestSlackPressReadWhileAllWorkersWait: with every worker busy (a
// thread reply to each of slackWorkers+1 questions, their images slow
// to download: one waits for a worker), a press on another question is
// read and acknowledged all the same within Slack's 3 s (past them
// Slack shows the person an error and sends the press again), its
// presser told it is not saved yet. Once the downloads come, every
// reply answers its question and the press its own, once.
func TestSlackPressReadWhileAllWorkersWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const dm = "D42"
		const replies = slackWorkers + 1
		api, free, threads, chosen, ts, press := questionsThenOne(t, replies)

		_, release := api.HoldFiles()
		defer release()
		acked := make(chan error, replies)
		for i, ts := range threads {
			shot := pngOf(t, color.RGBA{G: uint8(i), A: 255})
			reply := slacktest.FileReply("U42", dm, ts, fmt.Sprint("See ", i), api.AddFile(fmt.Sprint("F", i), "shot.png", "image/png", shot))
			go func() { acked <- api.Send(t.Context(), "events_api", reply) }() // acknowledged once answered
		}
		synctest.Wait() // every worker waits on a download, one reply on a worker
		if got := api.Fetched(); got != 0 {
			t.Fatalf("%d files downloaded while held", got)
		}
		within3s, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		if err := api.Send(within3s, "interactive", press); err != nil {
			t.Fatalf("the press while every worker waits: %v", err)
		}
		synctest.Wait()
		select {
		case rep := <-chosen:
			t.Fatalf("the press answered %+v before a worker was free", rep)
		default:
		}

		release()
		if got := textOf(answer(t, chosen)); got != "Yes" {
			t.Fatalf("the press answered %q", got)
		}
		for i := range replies {
			if err := <-acked; err != nil {
				t.Error(err)
			}
			if got := textOf(answer(t, free[i])); got != fmt.Sprint("See ", i) {
				t.Errorf("reply %d answered %q", i, got)
			}
		}
		synctest.Wait()
		// Handled once: its question's message updated as answered, its
		// presser told only that the answer waits its turn: nothing is
		// wrong with the store, so they are not told it cannot store it.
		if !slices.ContainsFunc(callsOn(api, "chat.update"), func(c map[string]string) bool { return c["ts"] == ts }) {
			t.Error("the pressed question's message was not updated")
		}
		for _, c := range callsOn(api, "chat.postEphemeral") {
			if c["text"] != slackBusyNote {
				t.Errorf("the presser was told %q", c["text"])
			}
		}
		if told := notTakenIn(api); len(told) != 0 {
			t.Errorf("the person was told %q", told)
		}
	})
}

// TestSlackPressPastTheQueueSentAgain: with every worker busy and
// maxSlackWaiting events waiting behind them, a press is not taken: it
// is left unacknowledged (never acknowledged and dropped), so Slack
// sends it again; sent again once the queue has room, it is taken,
// acknowledged and answers, once.
func TestSlackPressPastTheQueueSentAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const dm = "D42"
		api, _, threads, chosen, _, press := questionsThenOne(t, slackWorkers)

		_, release := api.HoldFiles()
		defer release()
		acked := make(chan error, slackWorkers+maxSlackWaiting)
		for i, ts := range threads {
			reply := slacktest.FileReply("U42", dm, ts, "See", api.AddFile(fmt.Sprint("F", i), "shot.png", "image/png", pngOf(t, color.White)))
			go func() { acked <- api.Send(t.Context(), "events_api", reply) }()
		}
		synctest.Wait() // every worker waits on a download
		for i := range maxSlackWaiting {
			reply := slacktest.ThreadReply("U42", dm, threads[i%slackWorkers], fmt.Sprint("And ", i))
			go func() { acked <- api.Send(t.Context(), "events_api", reply) }()
		}
		synctest.Wait()
		within3s, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		if err := api.Send(within3s, "interactive", press); err == nil {
			t.Fatal("a press past the queue's bound was acknowledged")
		}
		select {
		case rep := <-chosen:
			t.Fatalf("a press past the queue's bound answered %+v", rep)
		default:
		}

		release()
		for range slackWorkers + maxSlackWaiting {
			if err := <-acked; err != nil {
				t.Error(err)
			}
		}
		again, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		if err := api.Retry(again, "interactive", press); err != nil {
			t.Fatalf("the press sent again: %v", err)
		}
		if got := textOf(answer(t, chosen)); got != "Yes" {
			t.Fatalf("the press sent again answered %q", got)
		}
		synctest.Wait()
		for _, c := range callsOn(api, "chat.postEphemeral") {
			t.Errorf("the presser was told %q", c["text"])
		}
	})
}

// questionsThenOne asks n questions through Slack, in a synctest
// bubble, and then one more: free are the answers of the n, threads
// their messages' timestamps; chosen is the last's answer, ts its
// message's timestamp, press a press of its first button (Yes), not
// sent.
func questionsThenOne(t *testing.T, n int) (api *slacktest.API, free []chan *hub.Reply, threads []string, chosen chan *hub.Reply, ts string, press map[string]any) {
	t.Helper()
	api, _, h, _ := pipeSlack(t, nil)
	for i := range n {
		free = append(free, askOn(t, h, fmt.Sprint("q-", i)))
		threads = append(threads, api.Call(t, "chat.postMessage", i+1)["_ts"])
	}
	chosen = askOn(t, h, "q-press")
	form := api.Call(t, "chat.postMessage", n+1)
	blocks, err := slacktest.BlocksOf(form)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return api, free, threads, chosen, form["_ts"], slacktest.Press("U42", "D42", form["_ts"], blocks[1].Elements[0].Value)
}
