package mesh

import "testing"

func TestOffsetAddrs(t *testing.T) {
	got, err := OffsetAddrs(map[string][2]string{"a": {":50051", "127.0.0.1:9101"}, "b": {":8000", ""}}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if got["a"] != [2]string{":51051", "127.0.0.1:10101"} || got["b"] != [2]string{":9000", ""} {
		t.Errorf("OffsetAddrs = %v", got)
	}
	if _, err := OffsetAddrs(map[string][2]string{"a": {":65535", ""}}, 1); err == nil {
		t.Error("OffsetAddrs past port 65535 succeeded")
	}
	if _, err := OffsetAddrs(StandardAddrs, 0); err != nil {
		t.Errorf("OffsetAddrs(0) = %v", err)
	}
}
