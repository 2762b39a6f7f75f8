package partitioner

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// golden holds partitions computed once with franz-go's default key
// partitioner (kgo.StickyKeyPartitioner(nil)) and kept literal, so the test
// still pins behaviour if a client library ever changes. The keys cover the
// tail handling (lengths 0..9 hit every len&3 case and the first full block),
// bytes >= 0x80 (where sign-extension bugs show), non-ASCII text and long keys.
var golden = []struct {
	key                 string
	p3, p12, p1000, max int32
}{
	{"", 0, 9, 681, 275646681},
	{"a", 1, 4, 524, 584102524},
	{"ab", 2, 2, 434, 316155434},
	{"abc", 0, 3, 107, 479470107},
	{"abcd", 2, 8, 100, 823834100},
	{"abcde", 1, 1, 741, 461995741},
	{"abcdef", 0, 0, 108, 1870650108},
	{"abcdefg", 1, 1, 473, 1801016473},
	{"abcdefgh", 0, 9, 285, 1192056285},
	{"abcdefghi", 0, 6, 838, 1527803838},
	{"\x80", 2, 8, 492, 857690492},
	{"\xff\xff", 2, 8, 720, 504650720},
	{"\xff\xfe\xfd", 2, 8, 92, 998637092},
	{"\x00\x00\x00\x00", 1, 4, 120, 850957120},
	{"\x00", 2, 8, 588, 375494588},
	{"21", 0, 0, 340, 1173551340},
	{"foobar", 0, 6, 166, 1357151166},
	{"a-little-bit-long-string", 2, 8, 112, 1161502112},
	{"a-little-bit-longer-string", 2, 11, 819, 661178819},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", 2, 5, 677, 2088585677},
	{"order-42", 0, 0, 24, 501153024},
	{"customer:1001", 0, 0, 828, 2000451828},
	{"user-17", 0, 0, 380, 1149718380},
	{"evt-a", 0, 3, 63, 312105063},
	{"evt-b", 2, 2, 774, 214592774},
	{"evt-e", 0, 9, 549, 1062345549},
	{"héllo", 0, 6, 2, 614509002},
	{"日本語のキー", 2, 2, 942, 1412807942},
	{"🔑🗝️", 0, 0, 448, 1185803448},
	{"ключ", 2, 8, 24, 2122343024},
	{strings.Repeat("x", 255), 2, 11, 887, 1652787887},
	{strings.Repeat("0123456789", 100), 1, 7, 455, 801794455},
	{strings.Repeat("\xfe", 1027), 1, 4, 504, 2111143504},
}

func TestForKeyGolden(t *testing.T) {
	for _, g := range golden {
		for _, c := range []struct{ n, want int32 }{{3, g.p3}, {12, g.p12}, {1000, g.p1000}, {math.MaxInt32, g.max}} {
			if got := ForKey([]byte(g.key), c.n); got != c.want {
				t.Errorf("ForKey(%.20q, %d) = %d, want %d", g.key, c.n, got, c.want)
			}
		}
	}
}

// TestMurmur2JavaVectors checks the raw hash against values Kafka's own Java
// test suite (UtilsTest.testMurmur2) asserts, as signed ints.
func TestMurmur2JavaVectors(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	} {
		if got := int32(Murmur2([]byte(c.in))); got != c.want {
			t.Errorf("Murmur2(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestForKeyMatchesClients compares against franz-go and Sarama live, on the
// golden keys and on random keys of every length up to 64, with partition
// counts that include 1 and the int32 maximum.
func TestForKeyMatchesClients(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := [][]byte{nil, {}}
	for _, g := range golden {
		keys = append(keys, []byte(g.key))
	}
	for n := 0; n <= 64; n++ {
		for range 8 {
			k := make([]byte, n)
			for i := range k {
				k[i] = byte(rng.UintN(256))
			}
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		for _, n := range []int32{1, 2, 3, 7, 12, 64, 1000, math.MaxInt32} {
			got := ForKey(k, n)
			if f := franzPartition(k, n); got != f {
				t.Fatalf("ForKey(%x, %d) = %d, franz-go says %d", k, n, got, f)
			}
			if s := saramaPartition(t, k, n); got != s {
				t.Fatalf("ForKey(%x, %d) = %d, sarama says %d", k, n, got, s)
			}
		}
	}
}

func TestForKeyBadPartitionCount(t *testing.T) {
	for _, n := range []int32{0, -1, math.MinInt32} {
		if got := ForKey([]byte("k"), n); got != -1 {
			t.Errorf("ForKey(k, %d) = %d, want -1", n, got)
		}
	}
}

// TestToPositive pins the detail that distinguishes Kafka from abs(): the
// most negative hash maps to 0.
func TestToPositive(t *testing.T) {
	if got := toPositive(0x80000000); got != 0 {
		t.Errorf("toPositive(0x80000000) = %d, want 0", got)
	}
	if got := toPositive(0xffffffff); got != math.MaxInt32 {
		t.Errorf("toPositive(0xffffffff) = %d", got)
	}
}

func BenchmarkForKey(b *testing.B) {
	key := []byte(strings.Repeat("customer-", 4))
	for b.Loop() {
		ForKey(key, 12)
	}
}
