package table

import (
	"encoding/xml"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// style compares load_xlsx_styles of both sheets: the listed properties
// of every cell from A1 to the last one.
func (c *tableCtx) style(r map[string]any) (bool, error) {
	props := metric.Strings(r["props"])
	a, b, err := bothSides(r, func(idx any) (map[string]any, error) { return c.loadStyles(idx, props) })
	if err != nil {
		return false, err
	}
	if len(a) != len(b) {
		return false, nil
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || !metric.PyEqual(va, vb) {
			return false, nil
		}
	}
	return true, nil
}

func (c *tableCtx) loadStyles(idx any, props []string) (map[string]any, error) {
	wb, sh, err := c.sheetAt(idx)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if sh == nil || len(sh.cells) == 0 {
		// openpyxl's iter_cols yields nothing on a sheet without cells,
		// merged ranges or not.
		return out, nil
	}
	if cfChangesStyles(sh, props) {
		// OSWorld evaluates these conditional formats with the `formulas`
		// package; without that engine the score would be a guess.
		return nil, errors.New("style rule over formula-based conditional formatting is not supported")
	}
	mr, mc := sh.maxRowCol()
	if mr*mc > maxStyleCells {
		return nil, fmt.Errorf("style rule over %d×%d cells, more than %d: %w", mr, mc, maxStyleCells, metric.ErrOverCap)
	}
	sh.index()
	mergedAt := map[[2]int]bool{}
	area := 0
	for _, m := range sh.merged {
		area += (m.maxRow - m.minRow + 1) * (m.maxCol - m.minCol + 1)
		if area > maxStyleCells {
			return nil, fmt.Errorf("style rule over merged ranges of more than %d cells: %w", maxStyleCells, metric.ErrOverCap)
		}
		for row := m.minRow; row <= m.maxRow; row++ {
			for col := m.minCol; col <= m.maxCol; col++ {
				if row != m.minRow || col != m.minCol {
					mergedAt[[2]int{row, col}] = true
				}
			}
		}
	}
	// Cells the sheet does not write all have the zero style: read it once.
	var blank []any
	for col := 1; col <= mc; col++ {
		for row := 1; row <= mr; row++ {
			cv := wb.cellViewMerged(sh, row, col, mergedAt[[2]int{row, col}])
			if !cv.present && !cv.merged && blank != nil {
				out[colLetter(col)+strconv.Itoa(row)] = blank
				continue
			}
			list := make([]any, len(props))
			for i, p := range props {
				v, err := cv.styleOf(p)
				if err != nil {
					return nil, err
				}
				list[i] = v
			}
			if !cv.present && !cv.merged {
				blank = list
			}
			out[colLetter(col)+strconv.Itoa(row)] = list
		}
	}
	return out, nil
}

// cfEvaluated are the cfRule types load_xlsx_styles evaluates; it skips
// every other type (color scales, data bars, top 10, ...) without effect.
var cfEvaluated = []string{"expression", "containsText", "notContainsText", "endsWith", "beginsWith",
	"containsErrors", "notContainsErrors", "cellIs"}

// cfChangesStyles tells whether conditional formats could change the
// listed properties: only evaluated rules do, and not merge or hyperlink,
// which _read_cell_style reads from the cell whatever the format.
func cfChangesStyles(sh *sheet, props []string) bool {
	evaluated := slices.ContainsFunc(sh.cfTypes, func(t string) bool { return slices.Contains(cfEvaluated, t) })
	if !evaluated {
		return false
	}
	return slices.ContainsFunc(props, func(p string) bool { return p != "merge" && p != "hyperlink" })
}

// chartXML is the part of a chartSpace that load_charts reads.
type chartXML struct {
	Chart struct {
		Title    *titleXML `xml:"title"`
		PlotArea struct {
			Inner []struct {
				XMLName xml.Name
				BarDir  *valAttr `xml:"barDir"`
				Ser     []struct {
					Val *dataRef `xml:"val"`
					Cat *dataRef `xml:"cat"`
				} `xml:"ser"`
			} `xml:",any"`
		} `xml:"plotArea"`
		Legend *struct {
			Pos *valAttr `xml:"legendPos"`
		} `xml:"legend"`
	} `xml:"chart"`
}

type titleXML struct {
	Tx *struct {
		Rich *struct {
			P []struct {
				R []struct {
					T string `xml:"t"`
				} `xml:"r"`
			} `xml:"p"`
		} `xml:"rich"`
	} `xml:"tx"`
}

type dataRef struct {
	NumRef *struct {
		F *string `xml:"f"`
	} `xml:"numRef"`
	StrRef *struct {
		F *string `xml:"f"`
	} `xml:"strRef"`
}

// chartTypes are the plot area children openpyxl reads as charts.
var chartTypes = []string{"areaChart", "area3DChart", "lineChart", "line3DChart", "stockChart", "radarChart",
	"scatterChart", "pieChart", "pie3DChart", "doughnutChart", "barChart", "bar3DChart", "ofPieChart",
	"surfaceChart", "surface3DChart", "bubbleChart"}

// sameRendered compares the rendered properties load gives for both
// sheets, the properties listed under the rule's key.
func (c *tableCtx) sameRendered(r map[string]any, key string, load func(idx any, props []string) (map[string]string, error)) (bool, error) {
	props := metric.Strings(r[key])
	a, b, err := bothSides(r, func(idx any) (map[string]string, error) { return load(idx, props) })
	if err != nil {
		return false, err
	}
	return mapsEqual(a, b), nil
}

// chart compares load_charts of both sheets.
func (c *tableCtx) chart(r map[string]any) (bool, error) {
	return c.sameRendered(r, "chart_props", c.loadCharts)
}

// loadCharts is load_charts: for each chart of the sheet, keyed by its
// series' references, the requested properties rendered as one string.
func (c *tableCtx) loadCharts(idx any, props []string) (map[string]string, error) {
	wb, sh, err := c.sheetAt(idx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if sh == nil || sh.drawing == "" {
		return out, nil
	}
	parts, err := wb.chartParts(sh)
	if err != nil {
		return nil, err
	}
	for _, part := range parts {
		b, err := wb.z.read(part)
		if err != nil {
			return nil, err
		}
		var cx chartXML
		if err := xml.Unmarshal(b, &cx); err != nil {
			return nil, fmt.Errorf("chart %s: %w", part, err)
		}
		first := -1
		for i, in := range cx.Chart.PlotArea.Inner {
			if slices.Contains(chartTypes, in.XMLName.Local) {
				first = i
				break
			}
		}
		if first < 0 {
			return nil, fmt.Errorf("chart %s has no plot: %w", part, errPython)
		}
		ch := cx.Chart.PlotArea.Inner[first]
		var series []string
		for _, ser := range ch.Ser {
			series = append(series, refOf(ser.Val, true)+","+refOf(ser.Cat, false))
		}
		var info []string
		for _, p := range []string{"title", "legend", "width", "height", "type", "direction"} {
			if !slices.Contains(props, p) {
				continue
			}
			var v string
			switch p {
			case "title":
				v = titleText(cx.Chart.Title)
			case "legend":
				v = "None"
				if cx.Chart.Legend != nil {
					v = "r"
					if l := cx.Chart.Legend.Pos; l != nil && l.Val != nil {
						v = *l.Val
					}
				}
			case "width":
				v = "15"
			case "height":
				v = "7.5"
			case "type":
				v = ch.XMLName.Local
			case "direction":
				if ch.XMLName.Local != "barChart" && ch.XMLName.Local != "bar3DChart" {
					return nil, fmt.Errorf("barDir of a %s: %w", ch.XMLName.Local, errPython)
				}
				v = "col"
				if ch.BarDir != nil && ch.BarDir.Val != nil {
					v = *ch.BarDir.Val
				}
			}
			info = append(info, p+"="+v)
		}
		for _, p := range props {
			switch p {
			case "title", "legend", "width", "height", "type", "direction":
			default:
				return nil, fmt.Errorf("chart property %q is not supported", p)
			}
		}
		out[strings.Join(series, ";")] = strings.Join(info, "\x00")
	}
	return out, nil
}

// refOf is the formula of a numRef (or, for categories, strRef).
func refOf(d *dataRef, valueOnly bool) string {
	if d == nil {
		return ""
	}
	if d.NumRef != nil {
		if d.NumRef.F != nil {
			return *d.NumRef.F
		}
		return ""
	}
	if !valueOnly && d.StrRef != nil && d.StrRef.F != nil {
		return *d.StrRef.F
	}
	return ""
}

// titleText is ch.title.tx.rich.p[0].r[0].t, or None.
func titleText(t *titleXML) string {
	if t == nil || t.Tx == nil || t.Tx.Rich == nil || len(t.Tx.Rich.P) == 0 || len(t.Tx.Rich.P[0].R) == 0 {
		return "\x01None"
	}
	return t.Tx.Rich.P[0].R[0].T
}

// chartParts finds the chart parts of a sheet's drawing, in anchor order.
func (wb *workbook) chartParts(sh *sheet) ([]string, error) {
	rels, err := wb.z.rels(sh.part)
	if err != nil {
		return nil, err
	}
	drawing, ok := rels[sh.drawing]
	if !ok {
		return nil, nil
	}
	b, err := wb.z.read(drawing)
	if err != nil {
		if errors.Is(err, errNoPart) {
			return nil, nil
		}
		return nil, err
	}
	drels, err := wb.z.rels(drawing)
	if err != nil {
		return nil, err
	}
	var ids []string
	d := xml.NewDecoder(strings.NewReader(string(b)))
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "chart" {
			for _, a := range se.Attr {
				if a.Name.Local == "id" {
					ids = append(ids, a.Value)
				}
			}
		}
	}
	var parts []string
	for _, id := range ids {
		if p, ok := drels[id]; ok {
			parts = append(parts, p)
		}
	}
	return parts, nil
}

// pivotXML is a pivotTableDefinition.
type pivotXML struct {
	Name         string  `xml:"name,attr"`
	VisualTotals *string `xml:"visualTotals,attr"`
	ShowEmptyRow *string `xml:"showEmptyRow,attr"`
	ShowEmptyCol *string `xml:"showEmptyCol,attr"`
	ShowHeaders  *string `xml:"showHeaders,attr"`
	Location     struct {
		Ref            string `xml:"ref,attr"`
		FirstHeaderRow string `xml:"firstHeaderRow,attr"`
		FirstDataRow   string `xml:"firstDataRow,attr"`
		FirstDataCol   string `xml:"firstDataCol,attr"`
		RowPageCount   string `xml:"rowPageCount,attr"`
		ColPageCount   string `xml:"colPageCount,attr"`
	} `xml:"location"`
	Fields []struct {
		Items []struct {
			X *int    `xml:"x,attr"`
			H *string `xml:"h,attr"`
		} `xml:"items>item"`
	} `xml:"pivotFields>pivotField"`
	RowFields []struct {
		X int `xml:"x,attr"`
	} `xml:"rowFields>field"`
	ColFields []struct {
		X int `xml:"x,attr"`
	} `xml:"colFields>field"`
	PageFields []struct {
		Fld int `xml:"fld,attr"`
	} `xml:"pageFields>pageField"`
	DataFields []struct {
		Fld        int     `xml:"fld,attr"`
		Name       *string `xml:"name,attr"`
		Subtotal   *string `xml:"subtotal,attr"`
		ShowDataAs *string `xml:"showDataAs,attr"`
	} `xml:"dataFields>dataField"`
}

type pivotCacheXML struct {
	Source struct {
		Type string `xml:"type,attr"`
		WS   *struct {
			Ref   *string `xml:"ref,attr"`
			Sheet *string `xml:"sheet,attr"`
		} `xml:"worksheetSource"`
	} `xml:"cacheSource"`
}

const (
	relPivotTable = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/pivotTable"
	relPivotCache = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/pivotCacheDefinition"
)

// pivot compares load_pivot_tables of both sheets.
func (c *tableCtx) pivot(r map[string]any) (bool, error) {
	return c.sameRendered(r, "pivot_props", c.loadPivots)
}

// loadPivots is load_pivot_tables: per pivot table, keyed by its source
// range trimmed of unused leading and trailing fields, the requested
// properties rendered as one string.
func (c *tableCtx) loadPivots(idx any, props []string) (map[string]string, error) {
	wb, sh, err := c.sheetAt(idx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if sh == nil {
		return out, nil
	}
	for _, p := range props {
		switch p {
		case "name", "show_total", "show_empty_row", "show_empty_col", "show_headers", "location",
			"selection", "filter", "ordered", "col_fields", "row_fields", "data_fields", "data_fields_name":
		default:
			return nil, fmt.Errorf("pivot property %q is not supported", p)
		}
	}
	parts, err := wb.z.typedRels(sh.part, relPivotTable)
	if err != nil {
		return nil, err
	}
	for _, part := range parts {
		b, err := wb.z.read(part)
		if err != nil {
			return nil, err
		}
		var pt pivotXML
		if err := xml.Unmarshal(b, &pt); err != nil {
			return nil, fmt.Errorf("pivot table %s: %w", part, err)
		}
		caches, err := wb.z.typedRels(part, relPivotCache)
		if err != nil {
			return nil, err
		}
		if len(caches) == 0 {
			return nil, fmt.Errorf("pivot table %s has no cache: %w", part, errPython)
		}
		cb, err := wb.z.read(caches[0])
		if err != nil {
			return nil, err
		}
		var pc pivotCacheXML
		if err := xml.Unmarshal(cb, &pc); err != nil {
			return nil, fmt.Errorf("pivot cache %s: %w", caches[0], err)
		}
		key, info, err := pivotInfo(&pt, &pc, props)
		if err != nil {
			return nil, err
		}
		out[key] = info
	}
	return out, nil
}

func pivotInfo(pt *pivotXML, pc *pivotCacheXML, props []string) (string, string, error) {
	type item struct {
		h string
		x int
	}
	raw := make([][]item, len(pt.Fields))
	for i, f := range pt.Fields {
		for _, it := range f.Items {
			if it.X == nil {
				continue
			}
			h := "None"
			if it.H != nil {
				h = map[bool]string{true: "True", false: "False"}[xmlBool(*it.H, false)]
			}
			raw[i] = append(raw[i], item{h, *it.X})
		}
	}
	left := 0
	for left < len(raw) && len(raw[left]) == 0 {
		left++
	}
	right := len(raw)
	for right > left && len(raw[right-1]) == 0 {
		right--
	}
	rightBias := len(raw) - left - (right - left)
	selection := raw[left:right]
	ws := pc.Source.WS
	if ws == nil || ws.Ref == nil {
		return "", "", fmt.Errorf("pivot cache without a worksheet range: %w", errPython)
	}
	a, b, ok := strings.Cut(*ws.Ref, ":")
	if !ok {
		return "", "", fmt.Errorf("pivot cache range %q: %w", *ws.Ref, errPython)
	}
	r1, c1, err := parseCoord(a)
	if err != nil {
		return "", "", fmt.Errorf("pivot cache range %q: %w", *ws.Ref, errPython)
	}
	r2, c2, err := parseCoord(b)
	if err != nil {
		return "", "", fmt.Errorf("pivot cache range %q: %w", *ws.Ref, errPython)
	}
	sheetName := "None"
	if ws.Sheet != nil {
		sheetName = *ws.Sheet
	}
	key := fmt.Sprintf("%s;(%d, %d):(%d, %d);%s", pc.Source.Type, r1, c1+left, r2, c2-rightBias, sheetName)

	boolAttr := func(v *string, def bool) string {
		if v == nil {
			return fmt.Sprint(def)
		}
		return fmt.Sprint(xmlBool(*v, def))
	}
	has := func(p string) bool { return slices.Contains(props, p) }
	var info []string
	add := func(k, v string) { info = append(info, k+"="+v) }
	if has("name") {
		add("name", pt.Name)
	}
	if has("show_total") {
		add("show_total", boolAttr(pt.VisualTotals, true))
	}
	if has("show_empty_row") {
		add("show_empty_row", boolAttr(pt.ShowEmptyRow, false))
	}
	if has("show_empty_col") {
		add("show_empty_col", boolAttr(pt.ShowEmptyCol, false))
	}
	if has("show_headers") {
		add("show_headers", boolAttr(pt.ShowHeaders, true))
	}
	if has("location") {
		l := pt.Location
		add("location", strings.Join([]string{l.Ref, l.FirstHeaderRow, l.FirstDataRow, l.FirstDataCol, l.RowPageCount, l.ColPageCount}, ","))
	}
	if has("filter") || has("selection") {
		var fields []string
		for _, f := range selection {
			var ts []string
			for _, it := range f {
				ts = append(ts, fmt.Sprintf("(%s, %d)", it.h, it.x))
			}
			if !has("ordered") {
				slices.Sort(ts)
				ts = slices.Compact(ts)
			}
			fields = append(fields, "["+strings.Join(ts, ",")+"]")
		}
		add("selection", strings.Join(fields, ";"))
	}
	if has("filter") {
		var ff []int
		for _, f := range pt.PageFields {
			ff = append(ff, f.Fld)
		}
		slices.Sort(ff)
		add("filter_fields", fmt.Sprint(slices.Compact(ff)))
	}
	if has("col_fields") {
		var xs []int
		for _, f := range pt.ColFields {
			xs = append(xs, f.X-left)
		}
		add("col_fields", fmt.Sprint(xs))
	}
	if has("row_fields") {
		var xs []int
		for _, f := range pt.RowFields {
			xs = append(xs, f.X-left)
		}
		add("row_fields", fmt.Sprint(xs))
	}
	if has("data_fields") {
		var ds []string
		for _, f := range pt.DataFields {
			name := ""
			if has("data_fields_name") {
				name = "None"
				if f.Name != nil {
					name = *f.Name
				}
			}
			sub, show := "sum", "normal"
			if f.Subtotal != nil {
				sub = *f.Subtotal
			}
			if f.ShowDataAs != nil {
				show = *f.ShowDataAs
			}
			ds = append(ds, fmt.Sprintf("%d;%s;%s;%s", f.Fld-left, name, sub, show))
		}
		add("data_fields", strings.Join(ds, "\x00"))
	}
	return key, strings.Join(info, "\x01"), nil
}
