package rules

import (
	"fmt"

	"github.com/pgmedic/pgmedic/internal/model"
)

// lossyBitmap flags bitmap heap scans whose bitmap outgrew work_mem and
// degraded to whole pages, so every row on them is rechecked.
func lossyBitmap(in PlanInput) []model.Finding {
	var out []model.Finding
	all := allNodes(in.Explain)
	for _, n := range all {
		if n.NodeType != "Bitmap Heap Scan" || n.LossyHeapBlocks <= 0 {
			continue
		}
		pages := n.LossyHeapBlocks + n.ExactHeapBlocks
		lossy := n.LossyHeapBlocks / pages
		saved := n.Figures.ExclusiveMS * lossy * 0.5
		f := planFinding(in, LossyBitmapID, n, fmt.Sprintf("bitmap went lossy on %s of %s heap pages", count(n.LossyHeapBlocks), count(pages)), saved,
			"estimated as half the scan's time on lossy pages")
		f.Evidence = append(f.Evidence, ev("lossy pages", n.LossyHeapBlocks, "pages"), ev("exact pages", n.ExactHeapBlocks, "pages"),
			ev("rows removed by recheck", n.RowsRemovedByIndexRecheck*max(n.ActualLoops, 1), "rows"))
		// An exact bitmap page costs a few dozen bytes; 64 per page with
		// headroom keeps every page exact.
		f.Fix = model.Fix{Summary: "raise work_mem so the bitmap keeps one entry per row", SQL: workMemSQL(pages * 64 / 1024 * 2)}
		out = append(out, f)
	}
	return out
}

// LossyBitmapID is the stable id of the rule.
const LossyBitmapID = "lossy-bitmap"
