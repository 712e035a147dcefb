package srv

// Routes lists every registered route with its guard, so tests can check
// that each one refuses a request without the token.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }
