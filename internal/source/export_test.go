package source

import "time"

// Times are the start times of the snapshots the recorder kept so far,
// read under its lock, for tests that wait for the recording to reach a
// point.
func (r *Recorder) Times() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := make([]time.Time, len(r.bundle.Snapshots))
	for i, s := range r.bundle.Snapshots {
		ts[i] = s.Time
	}
	return ts
}
