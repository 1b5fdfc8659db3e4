package migrate

import "slices"

// BaselineVersion is the last version of the baseline.
const BaselineVersion = baselineVersion

// PreBaselineVersions returns a copy of the versions before the baseline.
func PreBaselineVersions() []int64 { return slices.Clone(preBaselineVersions) }
