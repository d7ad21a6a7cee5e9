package ui

// SetSharedWait makes h call f whenever a request starts waiting for
// shared work, so that a test knows when a second viewer has joined.
func SetSharedWait(h *Handler, f func(key string)) { h.sharedWait = f }
