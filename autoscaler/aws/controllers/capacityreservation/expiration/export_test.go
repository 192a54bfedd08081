package expiration

// WakeForTest is the channel Trigger signals.
func (c *Controller) WakeForTest() <-chan struct{} { return c.wake }
