package queue

// KnownEnd is the offset after the last one the cursor knows anything about: finished, held
// (in flight, delayed, buffered from the journal) or read past. Every offset below it was in
// the log when the cursor learnt of it, so a log whose high watermark is below KnownEnd lost
// records the cursor had seen: its journal outlived its log (a file copy taken while running,
// or a power cut under a sync policy that syncs the two files independently). The broker
// repairs that when it opens the queue; see Unfinished.
func (c *Cursor) KnownEnd() int64 {
	end := max(c.readPos, c.done.floor)
	if n := len(c.done.runs); n > 0 {
		end = max(end, c.done.runs[n-1].end)
	}
	for off := range c.msgs {
		end = max(end, off+1)
	}
	return end
}

// Unfinished counts the offsets in [a, b) that are not finished: messages held (in flight,
// delayed, buffered) or not read yet. Over a range of a queue's log, where every offset is a
// message, it is how many messages that range still owes its consumers.
func (c *Cursor) Unfinished(a, b int64) int64 {
	var n int64
	c.done.notDone(a, b, func(a, b int64) { n += b - a })
	return n
}
