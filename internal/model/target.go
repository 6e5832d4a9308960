package model

import (
	"fmt"
	"strings"
)

// Target describes what pgmedic is connected to. It never holds a password.
type Target struct {
	Host             string `json:"host"`
	Port             uint16 `json:"port"`
	Database         string `json:"database"`
	User             string `json:"user"`
	ServerVersion    string `json:"server_version,omitempty"`
	ServerVersionNum int    `json:"server_version_num,omitempty"`
}

// String is user@host:port/database, the way reports name a target.
func (t Target) String() string {
	host := t.Host
	if strings.HasPrefix(host, "/") {
		host = "socket " + host
	}
	return fmt.Sprintf("%s@%s:%d/%s", t.User, host, t.Port, t.Database)
}
