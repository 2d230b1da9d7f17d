package netbed

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/smartt-transport/smartt/transport/wire"
)

// TestFabricOps: on an emulated star (100 Mbit/s, the port model), a degraded host port
// serialises at its new rate and queues (seen in the samples), restored it is fast again;
// a flaky port loses some frames and delivers the rest, healed it loses none; the pcap of
// each host link holds every frame of the link, and the frames decode as our header.
func TestFabricOps(t *testing.T) {
	tb := upTestbed(t, Spec{Kind: KindStar, Mode: ModeEmulated, Hosts: 3, LinkRate: 100e6})
	fab, err := tb.RunFabricWith(PortModel{DataBytes: 256 << 10, ControlBytes: 64 << 10, Seed: 7},
		FabricOptions{Sample: &SampleOptions{Interval: int64(time.Millisecond)}, Capture: &CaptureOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			fab.Stop()
		}
	})
	if err := fab.StartSampling(time.Now()); err != nil {
		t.Fatal(err)
	}
	rx := listen(t, tb, "h2", 9000)
	rx.SetReadBuffer(4 << 20)
	tx := dial(t, tb, "h0", 20000, tb.Addr("h2"), 9000)
	const link, payload = "h2-sw0", 1000
	psn := uint32(0)
	buf := make([]byte, 2048)
	send := func(n int, gap time.Duration) {
		for range n {
			p := wire.Packet{Header: wire.Header{Type: wire.TypeData, SrcConn: 1}, Data: wire.Data{PSN: psn, MsgLen: 1 << 20,
				PayloadLen: payload}, Payload: make([]byte, payload)}
			m, err := p.Encode(buf)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Write(buf[:m]); err != nil {
				t.Fatal(err)
			}
			psn++
			if gap > 0 {
				time.Sleep(gap)
			}
		}
	}
	// recv reads until n datagrams arrived or none came for wait.
	recv := func(n int, wait time.Duration) int {
		got := 0
		for got < n {
			rx.SetReadDeadline(time.Now().Add(wait))
			if _, err := rx.Read(buf); err != nil {
				break
			}
			got++
		}
		return got
	}
	// A degrade can only lower the rate: above the link's 100 Mbit/s is refused.
	if err := fab.SetRate(link, 1e9); err == nil || !strings.Contains(err.Error(), "can only lower") {
		t.Fatalf("SetRate above the link rate: err = %v", err)
	}
	// Degraded to 10 Mbit/s: 40 frames of 1130 wire bytes take 36 ms to serialise.
	if err := fab.SetRate(link, 10e6); err != nil {
		t.Fatal(err)
	}
	send(40, 0)
	if got := recv(40, 2*time.Second); got != 40 {
		t.Fatalf("degraded: %d of 40 arrived", got)
	}
	if err := fab.SetRate(link, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	mark := psn
	send(40, 0)
	if got := recv(40, 2*time.Second); got != 40 {
		t.Fatalf("restored: %d of 40 arrived", got)
	}
	// Flaky: mean gap and burst 2 ms, 200 frames over at least 20 ms.
	if err := fab.Flaky(link, 2*time.Millisecond, 2*time.Millisecond, 1); err != nil {
		t.Fatal(err)
	}
	send(200, 100*time.Microsecond)
	got := recv(200, 300*time.Millisecond)
	if err := fab.Flaky(link, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	send(50, 0)
	if g := recv(50, 2*time.Second); g != 50 {
		t.Errorf("healed: %d of 50 arrived", g)
	}
	stopped = true
	if err := fab.Stop(); err != nil {
		t.Fatal(err)
	}
	var lost uint64
	for _, p := range fab.Counters() {
		if p.Link == link {
			lost = p.Lost
		}
	}
	t.Logf("flaky: %d of 200 arrived, %d lost at the port", got, lost)
	if got == 0 || got == 200 || uint64(got)+lost != 200 {
		t.Errorf("flaky: %d of 200 arrived and %d were lost; want some of each, adding up to 200", got, lost)
	}

	// Samples: the degraded port queued (many frames), the others stayed (nearly) empty.
	smp, late := fab.Samples()
	if len(smp) != 3 {
		t.Fatalf("%d sampled ports, want 3", len(smp))
	}
	for _, s := range smp {
		peak := slices.Max(s.Bytes)
		t.Logf("samples %s->%s: %d, peak %d B (latest sample %v late)", s.Switch, s.Peer, len(s.Times), peak, late)
		if len(s.Times) < 20 || s.Times[1]-s.Times[0] != int64(time.Millisecond) {
			t.Errorf("%s->%s: %d samples, first times %v", s.Switch, s.Peer, len(s.Times), s.Times[:min(2, len(s.Times))])
		}
		if want := s.Peer == "h2"; (peak >= 10*1130) != want {
			t.Errorf("%s->%s: peak queue %d B; want >= 10 frames only toward h2", s.Switch, s.Peer, peak)
		}
	}

	// pcaps: h0's link has every frame h0 sent (received at the switch), h2's link the
	// delivered ones; frames decode as our DATA header with the PSNs sent.
	dir := t.TempDir()
	cs, err := fab.WritePcaps(dir)
	if err != nil || len(cs) != 3 {
		t.Fatalf("pcaps: %v, %v", cs, err)
	}
	read := func(link string) (psns []uint32, times []time.Time) {
		f, err := os.Open(filepath.Join(dir, link+".pcap"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := pcapgo.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		if r.LinkType() != layers.LinkTypeEthernet || r.Snaplen() != 128 {
			t.Fatalf("%s: link type %v, snap %d", link, r.LinkType(), r.Snaplen())
		}
		for {
			data, ci, err := r.ReadPacketData()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			pk := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
			u, _ := pk.Layer(layers.LayerTypeUDP).(*layers.UDP)
			if u == nil || u.DstPort != 9000 {
				continue
			}
			var w wire.Packet
			if err := w.Decode(u.Payload); err != nil || w.Type != wire.TypeData || w.Data.PayloadLen != payload {
				t.Fatalf("%s: frame does not decode as our DATA: %v %+v", link, err, w.Header)
			}
			if ci.Length != 14+20+8+64+payload || ci.CaptureLength != 128 {
				t.Fatalf("%s: frame of %d bytes, %d captured", link, ci.Length, ci.CaptureLength)
			}
			psns, times = append(psns, w.Data.PSN), append(times, ci.Timestamp)
		}
		return psns, times
	}
	in, _ := read("h0-sw0")
	out, times := read(link)
	if len(in) != int(psn) || len(out) != int(psn)-int(lost) {
		t.Fatalf("pcaps: %d frames in from h0, %d out to h2; sent %d, lost %d", len(in), len(out), psn, lost)
	}
	for i, p := range in {
		if p != uint32(i) {
			t.Fatalf("h0-sw0.pcap: frame %d has PSN %d", i, p)
		}
	}
	checkDissector(t, filepath.Join(dir, "h0-sw0.pcap"), in)
	// Degraded: the first 40 left at 10 Mbit/s (0.9 ms each); restored: at 100 Mbit/s.
	slow := times[39].Sub(times[0])
	fast := times[mark+39].Sub(times[mark])
	t.Logf("40 frames left in %v degraded, %v restored", slow, fast)
	if slow < 28*time.Millisecond || fast > slow/2 {
		t.Errorf("40 frames took %v at 10 Mbit/s (serialisation 35 ms) and %v at 100 Mbit/s", slow, fast)
	}
}

// checkDissector runs docs/smartt.lua in tshark, if tshark is installed (it is not needed
// otherwise), over a pcap of DATA packets and compares type and PSN with what was sent.
func checkDissector(t *testing.T, pcap string, psns []uint32) {
	ts, err := exec.LookPath("tshark")
	if err != nil {
		t.Log("tshark not installed: the Wireshark dissector is not checked")
		return
	}
	out, err := exec.Command(ts, "-X", "lua_script:../../docs/smartt.lua", "-r", pcap, "-Y", "smartt",
		"-T", "fields", "-e", "smartt.type", "-e", "smartt.psn", "-e", "smartt.payload_len", "-e", "smartt.trimmed").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(psns) {
		t.Fatalf("tshark dissected %d smartt packets, want %d", len(lines), len(psns))
	}
	for i, l := range lines {
		// Captured 128 bytes of each: the header is whole, the payload short of PayloadLen
		// in the capture only, so not trimmed (the datagram's length decides).
		if want := fmt.Sprintf("1\t%d\t1000\t0", psns[i]); l != want {
			t.Fatalf("tshark line %d: %q, want %q", i, l, want)
		}
	}
	t.Logf("tshark with docs/smartt.lua: %d DATA packets, PSNs and lengths as sent", len(lines))
}
