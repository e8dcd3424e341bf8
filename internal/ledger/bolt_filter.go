package ledger

import (
	"hash/maphash"
	"sync"
)

// Each Create of a new call id looks for it in every live partition (the
// caller chooses ids, so they are not ordered by time): about nine B+tree
// searches, a fifth of the ledger's CPU in BenchmarkBoltSteadyState once
// the log made the writes cheap. A Bloom filter per partition, of the keys
// ever put in it, answers "not here" for most of them from memory.
//
// A filter may say a key is there that is not (under 1% of the time, and
// then the B+tree is read); it never says a key is not there that is:
// every put into a partition adds the key first (put), OpenBolt fills them
// from the file, and a partition without one is always read.

// filterLayerBits is the size of a partition's first layer: 8 KiB, for
// 4,681 keys at 0.2% false positives. Each next layer is twice the last
// (so a partition takes about 2 to 4 bytes a key), and a key absent from
// all of them is taken for one that may be held by any: after 100,000
// keys, in five layers, 0.5% of absent keys are (TestKeyFilter).
const (
	filterLayerBits  = 1 << 16
	filterBitsPerKey = 14
	filterHashes     = 8
)

// filterMostBits bounds a partition's filter (64 MiB); past it the filter
// gives up and the partition is always read.
var filterMostBits = 1 << 29

// keyFilters holds the filters of the partitions, by end.
type keyFilters struct {
	seed maphash.Seed
	mu   sync.RWMutex
	by   map[int64]*keyFilter
}

func newKeyFilters() *keyFilters {
	return &keyFilters{seed: maphash.MakeSeed(), by: make(map[int64]*keyFilter)}
}

func (fs *keyFilters) hash(key []byte) uint64 { return maphash.Bytes(fs.seed, key) }

// add records that key is in the partition that ends at end.
func (fs *keyFilters) add(end int64, key []byte) {
	h := fs.hash(key)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := fs.by[end]
	if f == nil {
		f = &keyFilter{}
		fs.by[end] = f
	}
	f.add(h)
}

// drop forgets the partition that ends at end, once it is gone.
func (fs *keyFilters) drop(end int64) {
	fs.mu.Lock()
	delete(fs.by, end)
	fs.mu.Unlock()
}

// mayHold says whether the partition that ends at end may hold the key
// hashed h (false: surely not). The caller holds mu for reading.
func (fs *keyFilters) mayHold(end int64, h uint64) bool {
	f := fs.by[end]
	return f == nil || f.mayHold(h)
}

// keyFilter is a layered Bloom filter: keys go into the newest layer
// until it holds its share, then a layer twice its size starts.
type keyFilter struct {
	layers []filterLayer
	full   bool // past filterMostBits: every key may be held
}

type filterLayer struct {
	bits []uint64
	n    int
}

func (f *keyFilter) add(h uint64) {
	if f.full {
		return
	}
	if len(f.layers) == 0 || f.layers[len(f.layers)-1].n >= len(f.layers[len(f.layers)-1].bits)*64/filterBitsPerKey {
		size := filterLayerBits
		total := 0
		for _, l := range f.layers {
			total += len(l.bits) * 64
			size = len(l.bits) * 64 * 2
		}
		if total+size > filterMostBits {
			f.full, f.layers = true, nil
			return
		}
		f.layers = append(f.layers, filterLayer{bits: make([]uint64, size/64)})
	}
	l := &f.layers[len(f.layers)-1]
	l.set(h)
	l.n++
}

func (f *keyFilter) mayHold(h uint64) bool {
	if f.full {
		return true
	}
	for i := range f.layers {
		if f.layers[i].has(h) {
			return true
		}
	}
	return false
}

// The k bit positions of h: double hashing of its halves (Kirsch and
// Mitzenmacher), over a layer whose size is a power of two.
func (l *filterLayer) set(h uint64) {
	a, b, mask := uint32(h), uint32(h>>32)|1, uint32(len(l.bits)*64-1)
	for i := range uint32(filterHashes) {
		bit := (a + i*b) & mask
		l.bits[bit/64] |= 1 << (bit % 64)
	}
}

func (l *filterLayer) has(h uint64) bool {
	a, b, mask := uint32(h), uint32(h>>32)|1, uint32(len(l.bits)*64-1)
	for i := range uint32(filterHashes) {
		bit := (a + i*b) & mask
		if l.bits[bit/64]&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}
