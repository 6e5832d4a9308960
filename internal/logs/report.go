package logs

// Parsed says whether any file gave an entry.
func (s *Summary) Parsed() bool {
	for _, f := range s.Files {
		if f.Entries > 0 {
			return true
		}
	}
	return false
}
