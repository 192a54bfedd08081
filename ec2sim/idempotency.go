package ec2sim

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"reflect"
	"sort"
	"sync"
)

// This file implements EC2's idempotency of launches ("Ensuring
// idempotency in Amazon EC2 API requests", Amazon EC2 Developer Guide): a
// CreateFleet or RunInstances request with a ClientToken already used by a
// successful request with the same parameters answers that request's
// result again and launches nothing; with different parameters it fails
// with IdempotentParameterMismatch. A token is case sensitive and at most
// 64 ASCII characters. The SDK sends one token for all the retries of a
// call (it fills ClientToken with a UUID when the caller leaves it empty),
// so a call whose answer was lost (LoseAnswers) and retried by the SDK
// launches once. Only answers that launched an instance are remembered: a
// fleet that launched nothing (every offering InsufficientInstanceCapacity)
// may be retried with the same token once capacity is back, which is what
// a caller retrying the same NodeClaim needs (a simplification: EC2 does not
// document what it keeps of an instant fleet that launched nothing).

// maxClientToken is the longest ClientToken EC2 accepts, in characters.
const maxClientToken = 64

// idempotentActions are the actions whose ClientToken the simulator honours.
var idempotentActions = map[string]bool{"CreateFleet": true, "RunInstances": true}

// idempotency remembers the result of every successful request with a
// ClientToken, and the answers to lose.
type idempotency struct {
	mu      sync.Mutex
	results map[string]idemResult // action + "/" + token
	lose    map[string]int        // action → answers still to lose
	replays int64
}

type idemResult struct {
	paramsHash string
	body       any
}

func newIdempotency() *idempotency {
	return &idempotency{results: map[string]idemResult{}, lose: map[string]int{}}
}

// paramsHash hashes the request's parameters except ClientToken.
func paramsHash(v url.Values) string {
	keys := make([]string, 0, len(v))
	for k := range v {
		if k != "ClientToken" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		for _, val := range v[k] {
			h.Write([]byte(k))
			h.Write([]byte{0})
			h.Write([]byte(val))
			h.Write([]byte{0})
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// do runs handle for req unless its ClientToken was used before, then
// answers as EC2 does; it also loses the answers LoseAnswers asked for.
func (id *idempotency) do(req *request, handle func() (any, error)) (any, error) {
	action := req.spec.name
	token := req.p.str("ClientToken")
	if !idempotentActions[action] {
		return handle()
	}
	if len(token) > maxClientToken {
		return nil, newError(CodeInvalidParameterValue, "Value (%s) for parameter clientToken is invalid. Client token must be at most %d characters.", truncate(token), maxClientToken)
	}
	hash := paramsHash(req.p.values)
	key := action + "/" + token
	if token != "" {
		id.mu.Lock()
		prev, ok := id.results[key]
		if ok {
			id.replays++
		}
		id.mu.Unlock()
		if ok {
			if prev.paramsHash != hash {
				return nil, newError("IdempotentParameterMismatch", "The client token %s has already been used for a request with different parameters.", token)
			}
			return shallowCopy(prev.body), nil
		}
	}
	body, err := handle()
	if err != nil {
		return nil, err
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if token != "" && launchedAny(body) {
		id.results[key] = idemResult{paramsHash: hash, body: body}
	}
	if id.lose[action] > 0 {
		id.lose[action]--
		return nil, newError(CodeInternalError, "An internal error has occurred")
	}
	return body, nil
}

// LoseAnswers makes the next n successful calls of action (CreateFleet or
// RunInstances) take effect but answer 500 InternalError, as when EC2's
// front end fails after the launch: the SDK retries, and only the
// ClientToken keeps the retry from launching again.
func (s *Simulator) LoseAnswers(action string, n int) {
	s.idem.mu.Lock()
	defer s.idem.mu.Unlock()
	s.idem.lose[action] = n
}

// IdempotentReplays returns how many CreateFleet and RunInstances calls
// were answered from an earlier call with the same ClientToken.
func (s *Simulator) IdempotentReplays() int64 {
	s.idem.mu.Lock()
	defer s.idem.mu.Unlock()
	return s.idem.replays
}

// shallowCopy returns a copy of the struct body points to, so that a
// replayed answer gets its own request id.
func shallowCopy(body any) any {
	v := reflect.ValueOf(body)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return body
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	return c.Interface()
}

// launchedAny reports whether a CreateFleet or RunInstances answer holds an
// instance.
func launchedAny(body any) bool {
	switch b := body.(type) {
	case *createFleetResponse:
		return len(b.Instances) > 0
	default:
		return true
	}
}
