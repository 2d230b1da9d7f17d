package apitypes

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
)

// SnakeCase converts a Go identifier to the API's JSON key style: "RTTHist" to
// "rtt_hist", "TimestampSource" to "timestamp_source", "CERecv" to "ce_recv".
func SnakeCase(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prev := r[i-1]
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// SnakeJSON returns v as generic JSON (maps, slices, json.Number) with every object key
// in snake_case: for bodies whose Go types carry no JSON tags (the engine's and the
// datapath's counters and capabilities). nil stays nil.
func SnakeJSON(v any) any {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return map[string]string{"error": err.Error()}
	}
	return snakeKeys(x)
}

func snakeKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, y := range x {
			m[SnakeCase(k)] = snakeKeys(y)
		}
		return m
	case []any:
		for i := range x {
			x[i] = snakeKeys(x[i])
		}
		return x
	}
	return v
}
