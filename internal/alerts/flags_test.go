package alerts

import "flag"

var update = flag.Bool("update", false, "rewrite the generated rule files in deploy/")
