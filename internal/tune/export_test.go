package tune

// The checks apply makes, for the tests of package tune_test, which plan
// from recorded hosts (tunetest imports tune).
var (
	CheckAllowed = checkAllowed
	CheckEdits   = checkEdits
)
