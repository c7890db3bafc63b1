package load

import lua "github.com/yuin/gopher-lua"

// argUse is how a Lua function uses one of its arguments, as far as its
// bytecode tells: response() is called for every response, and what it
// does not look at need not be built for it.
type argUse uint8

const (
	// argUnused: no instruction reads the argument's register (or the
	// argument is past the parameters and dropped), so its value cannot
	// be observed and need not be built.
	argUnused argUse = iota
	// argIndexed: the argument is only indexed (t[k], t.k) and measured
	// (#t), never copied, passed, returned, stored or captured, so a
	// table given as this argument cannot outlive the call and one table
	// may be refilled for every call.
	argIndexed
	// argEscapes: anything else; the argument may be kept by the script
	// and must be a value of its own on every call.
	argEscapes
)

// gopher-lua's bytecode is Lua 5.1's: opcode in the top 6 bits, A in
// the next 8, then C and B in 9 each; B and C with bit 8 set (RK
// operands) name constants, not registers.
const rkConst = 1 << 8 // an RK operand with this bit is a constant

// regTop stands for "up to the top of the stack" in a register range.
const regTop = 1 << 16

// scanArg returns how fn uses its argument n (0-based). It errs on the
// side of argEscapes: an instruction whose operands might touch the
// argument's register in any way but indexing counts as a use that lets
// it escape, ranges ending at the stack top included.
func scanArg(fn *lua.LFunction, n int) argUse {
	if fn == nil || fn.IsG || fn.Proto == nil {
		return argEscapes // a Go function: nothing to read
	}
	p := fn.Proto
	if n >= int(p.NumParameters) {
		if p.IsVarArg != 0 {
			return argEscapes // it is in ... (and in arg, in Lua 5.0 style)
		}
		return argUnused // dropped by the call
	}
	use := argUnused
	for _, inst := range p.Code {
		op := int(inst >> 26)
		a, b, c := int(inst>>18)&0xff, int(inst&0x1ff), int(inst>>9)&0x1ff
		in := func(lo, hi int) bool { return lo <= n && n <= hi }
		reg := func(rk int) bool { return rk&rkConst == 0 && rk == n }
		var touches bool
		switch op {
		case lua.OP_GETTABLE, lua.OP_GETTABLEKS:
			if b == n && a != n && !reg(c) {
				use = max(use, argIndexed) // R(A) := arg[RK(C)]
				continue
			}
			touches = a == n || b == n || reg(c)
		case lua.OP_LEN:
			if b == n && a != n {
				use = max(use, argIndexed) // R(A) := #arg
				continue
			}
			touches = a == n || b == n
		case lua.OP_MOVE, lua.OP_MOVEN, lua.OP_UNM, lua.OP_NOT, lua.OP_TESTSET: // A, B registers (MOVEN's C is a count)
			touches = a == n || b == n
		case lua.OP_LOADK, lua.OP_LOADBOOL, lua.OP_GETUPVAL, lua.OP_GETGLOBAL, lua.OP_SETGLOBAL, lua.OP_SETUPVAL,
			lua.OP_NEWTABLE, lua.OP_TEST, lua.OP_CLOSURE: // A register
			touches = a == n
		case lua.OP_LOADNIL:
			touches = in(a, b)
		case lua.OP_SETTABLE, lua.OP_SETTABLEKS, lua.OP_ADD, lua.OP_SUB, lua.OP_MUL, lua.OP_DIV, lua.OP_MOD, lua.OP_POW:
			touches = a == n || reg(b) || reg(c)
		case lua.OP_SELF:
			touches = in(a, a+1) || b == n || reg(c)
		case lua.OP_CONCAT:
			touches = a == n || in(b, c)
		case lua.OP_EQ, lua.OP_LT, lua.OP_LE: // A is the expected result
			touches = reg(b) || reg(c)
		case lua.OP_JMP, lua.OP_NOP:
		case lua.OP_RETURN: // R(A) ... R(A+B-2), or up to the top if B is 0
			touches = in(a, regTop) && (b == 0 || n <= a+b-2)
		case lua.OP_FORLOOP, lua.OP_FORPREP:
			touches = in(a, a+3)
		default: // CALL, TAILCALL, TFORLOOP, SETLIST, CLOSE, VARARG, unknown
			touches = in(a, regTop)
		}
		if touches {
			return argEscapes
		}
	}
	return use
}
