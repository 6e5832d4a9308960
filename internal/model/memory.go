package model

import (
	"fmt"
	"strconv"
	"strings"
)

// MemoryKB reads a memory setting as PostgreSQL writes it: a number of
// kilobytes as pg_settings gives work_mem ("4096"), or with a unit
// ("64MB", "1GB", "512kB"); 0 when it cannot be read.
func MemoryKB(v string) float64 {
	v = strings.TrimSpace(v)
	mult := 1.0
	for _, u := range []struct {
		suffix string
		kb     float64
	}{{"TB", 1 << 30}, {"GB", 1 << 20}, {"MB", 1 << 10}, {"kB", 1}} {
		if strings.HasSuffix(v, u.suffix) {
			mult, v = u.kb, strings.TrimSpace(strings.TrimSuffix(v, u.suffix))
			break
		}
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n * mult
}

// MemorySetting is the smallest power of two megabytes (at least 4MB,
// work_mem's default) that holds kb, written as a SET takes it ("32MB",
// "2GB").
func MemorySetting(kb float64) string {
	mb := 4.0
	for mb*1024 < kb {
		mb *= 2
	}
	if mb >= 1024 {
		return fmt.Sprintf("%.0fGB", mb/1024)
	}
	return fmt.Sprintf("%.0fMB", mb)
}

// MemoryText writes kb in the largest unit that divides it, as
// PostgreSQL's SHOW does ("4MB", "1GB", "1500kB").
func MemoryText(kb float64) string {
	switch {
	case kb <= 0:
		return "unknown"
	case kb >= 1<<20 && int64(kb)%(1<<20) == 0:
		return fmt.Sprintf("%dGB", int64(kb)>>20)
	case kb >= 1<<10 && int64(kb)%(1<<10) == 0:
		return fmt.Sprintf("%dMB", int64(kb)>>10)
	}
	return fmt.Sprintf("%.0fkB", kb)
}

// WorkMemCost says what a work_mem would cost if every connection the
// server allows used it once at the same time (each sort or hash node of
// a query may take that much): the reason to set it per statement.
func WorkMemCost(a Activity, workMem string) string {
	kb := MemoryKB(workMem)
	if kb <= 0 || a.MaxConnections <= 0 {
		return ""
	}
	return fmt.Sprintf("work_mem = %s for the whole server could take %s if its %d connections (max_connections) each ran one such node at once (%d are open now)",
		workMem, MemoryText(kb*float64(a.MaxConnections)), a.MaxConnections, a.Total)
}
