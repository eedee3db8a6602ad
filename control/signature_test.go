package control

import (
	"testing"
	"time"
)

func FuzzParseSignedHeaders(f *testing.F) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	f.Add("msg_1", "1800000000", Sign(secret, "msg_1", now, []byte("{}")))
	f.Add("msg_1", "1800000000", "v1,abc v1a,xyz v2,"+Sign(secret, "msg_1", now, nil)[3:])
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, id, ts, sig string) {
		p, err := ParseSignedHeaders(SignedHeaders{ID: id, Timestamp: ts, Signature: sig})
		if err != nil {
			if AsRefusal(err) == nil {
				t.Fatalf("not a refusal: %v", err)
			}
			return
		}
		if p.ID != id || len(p.Signatures) == 0 || len(p.Signatures) > MaxSignatures {
			t.Fatalf("%q %q %q parsed to %+v", id, ts, sig, p)
		}
		for _, s := range p.Signatures {
			if len(s) != 32 {
				t.Fatalf("a signature of %d bytes", len(s))
			}
		}
		// A parse never verifies by itself: a made-up header fails unless it is the true one.
		if VerifySignature(p, []byte("body"), [][]byte{secret}, p.Timestamp) == nil &&
			sig != Sign(secret, id, p.Timestamp, []byte("body")) && !containsSig(sig, Sign(secret, id, p.Timestamp, []byte("body"))) {
			t.Fatalf("%q verified", sig)
		}
	})
}

func containsSig(header, sig string) bool {
	for i := 0; i+len(sig) <= len(header); i++ {
		if header[i:i+len(sig)] == sig {
			return true
		}
	}
	return false
}
