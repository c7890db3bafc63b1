//go:build !linux

package app

import "time"

func affinity(int) []int { return nil }

func uptimeAt(time.Time) time.Duration { return 0 }
