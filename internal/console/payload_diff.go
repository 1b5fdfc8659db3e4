package console

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/switchyard/switchyard/web/templates"
)

// prettyJSON indents a JSON payload for reading and diffing; text that is
// not JSON is returned as it is.
func prettyJSON(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// compactJSON strips insignificant space from valid JSON.
func compactJSON(raw []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

// maxDiffLines bounds the quadratic line diff; beyond it the diff shows the
// whole original removed and the whole edit added.
const maxDiffLines = 2000

// lineDiff is a line diff of a against b (longest common subsequence), and
// whether they differ.
func lineDiff(a, b string) ([]templates.DiffLine, bool) {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	if a == b {
		return lines(" ", x), false
	}
	if len(x) > maxDiffLines || len(y) > maxDiffLines {
		return append(lines("-", x), lines("+", y)...), true
	}
	lcs := lcsTable(x, y)
	var out []templates.DiffLine
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] == y[j]:
			out = append(out, templates.DiffLine{Op: " ", Text: x[i]})
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, templates.DiffLine{Op: "-", Text: x[i]})
			i++
		default:
			out = append(out, templates.DiffLine{Op: "+", Text: y[j]})
			j++
		}
	}
	return append(append(out, lines("-", x[i:])...), lines("+", y[j:])...), true
}

// lcsTable holds at [i][j] the length of the longest common subsequence of
// x[i:] and y[j:].
func lcsTable(x, y []string) [][]int {
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	return lcs
}

func lines(op string, texts []string) []templates.DiffLine {
	out := make([]templates.DiffLine, len(texts))
	for i, t := range texts {
		out[i] = templates.DiffLine{Op: op, Text: t}
	}
	return out
}
