package main

import (
	"bufio"
	"context"
	"image"
	"image/color"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/makiuchi-d/gozxing"
	gozxingqr "github.com/makiuchi-d/gozxing/qrcode"
)

// readQR decodes the QR code writeQR drew in lines with a decoder the
// project did not write (gozxing, a port of ZXing).
func readQR(t *testing.T, lines []string) string {
	t.Helper()
	var rows [][]bool
	for _, l := range lines {
		var top, bottom []bool
		cells := strings.Split(l, "▀") // each cell's colours come before it
		for _, cell := range cells[:len(cells)-1] {
			top = append(top, strings.Contains(cell, "\x1b[30m"))
			bottom = append(bottom, strings.Contains(cell, "\x1b[40m"))
		}
		rows = append(rows, top, bottom)
	}
	const scale = 4
	img := image.NewGray(image.Rect(0, 0, len(rows[0])*scale, len(rows)*scale))
	for y, row := range rows {
		for x, dark := range row {
			c := color.Gray{Y: 255}
			if dark {
				c.Y = 0
			}
			for dy := range scale {
				for dx := range scale {
					img.SetGray(x*scale+dx, y*scale+dy, c)
				}
			}
		}
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := gozxingqr.NewQRCodeReader().Decode(bmp, nil)
	if err != nil {
		t.Fatalf("the QR code does not read: %v", err)
	}
	return res.GetText()
}

// TestQRCodeReadsBack: the terminal's QR code holds the URL.
func TestQRCodeReadsBack(t *testing.T) {
	const u = "http://192.168.1.20:22080/?token=abcdefghijklmnopqrstuvwxyz0123456789"
	var b strings.Builder
	if err := writeQR(&b, u); err != nil {
		t.Fatal(err)
	}
	if got := readQR(t, strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")); got != u {
		t.Fatalf("the QR code reads %q", got)
	}
}

func TestPhoneURL(t *testing.T) {
	u := url.URL{Scheme: "https", Host: "127.0.0.1:22080", Path: "/", RawQuery: "token=t"}
	lan := []netip.Addr{netip.MustParseAddr("192.168.1.20"), netip.MustParseAddr("2001:db8::1")}
	for _, c := range []struct {
		host  string
		addrs []netip.Addr
		want  string
	}{
		{"127.0.0.1", lan, ""},
		{"localhost", lan, ""},
		{"0.0.0.0", lan, "https://192.168.1.20:22080/?token=t"},
		{"::", lan[1:], "https://[2001:db8::1]:22080/?token=t"},
		{"0.0.0.0", nil, ""},
		{"box.lan", lan, "https://box.lan:22080/?token=t"},
	} {
		if got := phoneURL(u, c.host, c.addrs); got != c.want {
			t.Errorf("phoneURL(%q, %v) = %q, want %q", c.host, c.addrs, got, c.want)
		}
	}
}

// TestPhoneOpensTheServer: listening on every address, the server
// prints the phone's URL as a QR code, and that URL, at this machine's
// network address, opens the inbox (its Host is one the server answers
// to).
func TestPhoneOpensTheServer(t *testing.T) {
	addrs := ownAddrs()
	if len(addrs) == 0 {
		t.Skip("this machine has no address beyond loopback")
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-host", "0.0.0.0", "-port", "0", "-qr", "-data", t.TempDir(), "-token", "phone-token-0123456789"}, pw, io.Discard)
		_ = pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var printed string
	var qr []string
	deadline := time.After(20 * time.Second)
	for stop := false; !stop; {
		select {
		case l, ok := <-lines:
			switch {
			case !ok:
				t.Fatal("run ended before printing the phone's URL")
			case strings.Contains(l, "▀"):
				qr = append(qr, l)
			case strings.HasPrefix(strings.TrimSpace(l), "http://") && strings.Contains(l, addrs[0].String()):
				printed = strings.TrimSpace(l)
			case strings.HasPrefix(l, "Notifications with the page closed need HTTPS"):
				stop = true
			}
		case <-deadline:
			t.Fatal("no phone URL printed")
		}
	}
	go func() { // the rest of the output
		for range lines {
		}
	}()
	if len(qr) == 0 {
		t.Fatal("no QR code printed")
	}
	phone := readQR(t, qr)
	if phone != printed || !strings.Contains(phone, "token=phone-token-0123456789") {
		t.Fatalf("the QR code reads %q; printed %q", phone, printed)
	}
	resp, err := http.Get(phone)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<html") {
		t.Fatalf("the phone's URL answers %d:\n%.300s", resp.StatusCode, body)
	}
	// Another name is still refused.
	req, _ := http.NewRequest(http.MethodGet, phone, nil)
	req.Host = "attacker.example"
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode == http.StatusOK {
		t.Fatal("a Host of another name is answered")
	}
}
