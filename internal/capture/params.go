package capture

import "strings"

// Parameters reads the values of a DETAIL line "parameters: $1 = '42',
// $2 = NULL, $3 = 'it”s'" (PostgreSQL writes each value as a quoted
// literal, its quotes doubled, or NULL). ok is false when the text is not
// such a list. A value cut by log_parameter_max_length ends in "..."
// inside its quotes, like a value that really ends so: the default (-1)
// cuts nothing, and the capture's notes say to keep it.
func Parameters(detail string) (params []*string, ok bool) {
	i := strings.Index(detail, "parameters: ")
	if i < 0 {
		return nil, false
	}
	s := detail[i+len("parameters: "):]
	for n := 1; ; n++ {
		s = strings.TrimLeft(s, " ")
		// $n
		if !strings.HasPrefix(s, "$") {
			return nil, false
		}
		j := 1
		num := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			num = num*10 + int(s[j]-'0')
			j++
			if num > 65535 {
				return nil, false
			}
		}
		if j == 1 || num != n || !strings.HasPrefix(s[j:], " = ") {
			return nil, false
		}
		s = s[j+3:]
		switch {
		case strings.HasPrefix(s, "NULL"):
			params = append(params, nil)
			s = s[4:]
		case strings.HasPrefix(s, "'"):
			var b strings.Builder
			k := 1
			closed := false
			for k < len(s) {
				if s[k] == '\'' {
					if k+1 < len(s) && s[k+1] == '\'' {
						b.WriteByte('\'')
						k += 2
						continue
					}
					closed = true
					k++
					break
				}
				b.WriteByte(s[k])
				k++
			}
			if !closed {
				return nil, false
			}
			v := b.String()
			params = append(params, &v)
			s = s[k:]
		default:
			return nil, false
		}
		if s == "" || s[0] == '\n' {
			return params, true
		}
		if !strings.HasPrefix(s, ",") {
			return nil, false
		}
		s = s[1:]
	}
}
