package kd

import (
	"encoding/json"
	"reflect"
	"testing"
)

// sameAsJSON checks that decodeFacts gives what json.Unmarshal gives (value and error or not),
// and whether the flat reader or the fallback decided.
func sameAsJSON[T any](t *testing.T, in string, set func(*T, []byte, *flatScanner), flat bool) {
	t.Helper()
	var want []T
	wantErr := json.Unmarshal([]byte(in), &want)
	got, err := decodeFacts([]byte(in), set)
	if (err != nil) != (wantErr != nil) || (wantErr == nil && !reflect.DeepEqual(got, want)) {
		t.Errorf("%s: got %#v (%v), encoding/json %#v (%v)", in, got, err, want, wantErr)
	}
	if _, ok := decodeFlat([]byte(in), set); ok != flat {
		t.Errorf("%s: read by the flat reader %v, want %v", in, ok, flat)
	}
}

func TestDecodeFactsFlat(t *testing.T) {
	sameAsJSON(t, `[]`, setTaint, true)
	sameAsJSON(t, ` [ ] `, setTaint, true)
	sameAsJSON(t, `[{"key":"dedicated","value":"batch","effect":"NoSchedule"},{"key":"k","value":"","effect":"NoExecute"}]`, setTaint, true)
	sameAsJSON(t, `[{}]`, setToleration, true)
	sameAsJSON(t, `[{"key":"","operator":"Exists","value":"","effect":""}]`, setToleration, true)
	sameAsJSON(t, `[{"type":"Ready","status":"False","reason":"","lastTransitionUnix":1700000000},{"type":"X","status":"True","reason":"r","lastTransitionUnix":null}]`, setCondition, true)
	sameAsJSON(t, `[{"name":"app","kind":"app","restartCount":3,"ready":true,"waitingReason":"CrashLoopBackOff","terminatedReason":"","exitCode":null,"lastExitCode":-1}]`, setContainer, true)
	sameAsJSON(t, `[{"name":"a","kind":"init","restartCount":-2147483648,"ready":false,"waitingReason":"","terminatedReason":"Error","exitCode":2147483647,"lastExitCode":null}]`, setContainer, true)
	sameAsJSON(t, `[{"kind":"ReplicaSet","name":"web-1","controller":true},{"kind":"Node","name":"n","controller":false}]`, setOwner, true)
	sameAsJSON(t, `[{"type":"A","lastTransitionUnix":-9223372036854775808},{"lastTransitionUnix":9223372036854775807}]`, setCondition, true)
	sameAsJSON(t, `[{"kind":"ünïcode ✓","name":"x"}]`, setOwner, true)
}

func TestDecodeFactsFallback(t *testing.T) {
	sameAsJSON(t, `null`, setTaint, false)
	sameAsJSON(t, `[{"key":"a\"b","value":"\u00e9","effect":"NoSchedule"}]`, setTaint, false)
	sameAsJSON(t, `[{"Key":"loose","VALUE":"match"}]`, setTaint, false)
	sameAsJSON(t, `[{"key":"a","extra":1}]`, setTaint, false)
	sameAsJSON(t, `[{"key":"a"}`, setTaint, false)
	sameAsJSON(t, `[{"key":"a"}] x`, setTaint, false)
	sameAsJSON(t, `[{"key":null}]`, setTaint, false)
	sameAsJSON(t, `[{"restartCount":2147483648}]`, setContainer, false)
	sameAsJSON(t, `[{"restartCount":1.0}]`, setContainer, false)
	sameAsJSON(t, `[{"restartCount":1e2}]`, setContainer, false)
	sameAsJSON(t, `[{"restartCount":01}]`, setContainer, false)
	sameAsJSON(t, `[{"ready":"yes"}]`, setContainer, false)
	sameAsJSON(t, `[{"lastTransitionUnix":9223372036854775808}]`, setCondition, false)
	sameAsJSON(t, `[{"lastTransitionUnix":-9223372036854775809}]`, setCondition, false)
	sameAsJSON(t, `[{"controller":tru}]`, setOwner, false)
	sameAsJSON(t, `[{"kind":"a",}]`, setOwner, false)
	sameAsJSON(t, `[{"kind":"a"},]`, setOwner, false)
	sameAsJSON(t, "[{\"kind\":\"a\tb\"}]", setOwner, false)
}
