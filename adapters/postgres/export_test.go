package postgres

// Deafen stops the cache's listener hearing catalog notifications while
// its connection stays up and its pings keep it live: the cache then
// learns of a change only from this process's own writes, as it does in
// the window before a NOTIFY arrives.
func (c *CatalogCache) Deafen() error { return c.listener.Unlisten(catalogChannel) }

// Invalidate is what a notification or a local write does to the cache.
func (c *CatalogCache) Invalidate(model string) { c.invalidate(model) }
