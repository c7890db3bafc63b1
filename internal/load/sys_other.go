//go:build !linux

package load

func raiseNofile(conns int) (int, string) { return conns, "" }
func processCPU() float64                 { return 0 }
func threadCPU() float64                  { return 0 }
