package api_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/apitypes"
)

// jsonKeys returns the top-level keys v marshals to.
func jsonKeys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(m))
}

// The client-side copies of the server's JSON bodies must decode every key the server
// writes: a field added to transport.Stats or api.Config needs its twin in apitypes.
func TestAPITypesMatchServer(t *testing.T) {
	var served struct{ Engine map[string]json.RawMessage }
	b, _ := json.Marshal(api.Counters{})
	if err := json.Unmarshal(b, &served); err != nil {
		t.Fatal(err)
	}
	if got, want := jsonKeys(t, apitypes.EngineStats{}), slices.Sorted(maps.Keys(served.Engine)); !slices.Equal(got, want) {
		t.Errorf("apitypes.EngineStats keys %v\ntransport.Stats keys %v", got, want)
	}
	if got, want := jsonKeys(t, apitypes.Limits{}), jsonKeys(t, api.DefaultConfig()); !slices.Equal(got, want) {
		t.Errorf("apitypes.Limits keys %v\napi.Config keys %v", got, want)
	}
	// A server body decodes into the client type with the same values.
	var st transport.Stats
	st.MsgsSent, st.RTTHist[3], st.MalformedByKind[1], st.Auth.Failed = 7, 5, 2, 9
	b, _ = json.Marshal(api.Counters{Engine: st})
	var c apitypes.Counters
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Engine.MsgsSent != 7 || c.Engine.RTTHist[3] != 5 || len(c.Engine.RTTHist) != transport.RTTBuckets ||
		c.Engine.MalformedByKind[1] != 2 || c.Engine.Auth["failed"] != 9 ||
		len(c.Engine.RTTHistBoundsNs) != transport.RTTBuckets || c.Engine.RTTHistBoundsNs[0] != 1024 {
		t.Errorf("decoded %+v", c.Engine)
	}
	cfg := api.DefaultConfig()
	b, _ = json.Marshal(api.Capabilities{Limits: cfg})
	var caps apitypes.Capabilities
	if err := json.Unmarshal(b, &caps); err != nil {
		t.Fatal(err)
	}
	if caps.Limits.MaxMessage != cfg.MaxMessage || int64(caps.Limits.ReadTimeout) != int64(cfg.ReadTimeout) || caps.Limits.Socket != cfg.Socket {
		t.Errorf("limits %+v, want %+v", caps.Limits, cfg)
	}
	// Every key of every body is snake_case.
	for _, k := range slices.Concat(jsonKeys(t, apitypes.EngineStats{}), jsonKeys(t, apitypes.Stats{}), jsonKeys(t, apitypes.Conn{}),
		jsonKeys(t, apitypes.Status{}), jsonKeys(t, apitypes.Version{}), jsonKeys(t, apitypes.SessionInfo{Cred: &apitypes.PeerCred{}}),
		jsonKeys(t, apitypes.Capabilities{}), jsonKeys(t, apitypes.Limits{})) {
		if k != strings.ToLower(k) || strings.ContainsAny(k, "- ") {
			t.Errorf("key %q is not snake_case", k)
		}
	}
	if reflect.TypeFor[api.SentInfo]() != reflect.TypeFor[apitypes.SentInfo]() {
		t.Error("api.SentInfo is not apitypes.SentInfo")
	}
}
