package table

import (
	"encoding/xml"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// The rule kinds no published task uses (col_props, filter, sparkline),
// read from a second pass over the sheet XML.

type colXML struct {
	Min          *string `xml:"min,attr"`
	Max          *string `xml:"max,attr"`
	Width        *string `xml:"width,attr"`
	BestFit      *string `xml:"bestFit,attr"`
	Hidden       *string `xml:"hidden,attr"`
	OutlineLevel *string `xml:"outlineLevel,attr"`
	Collapsed    *string `xml:"collapsed,attr"`
}

type filterColumnXML struct {
	ColID        int     `xml:"colId,attr"`
	HiddenButton *string `xml:"hiddenButton,attr"`
	ShowButton   *string `xml:"showButton,attr"`
	Filters      *struct {
		Blank  *string `xml:"blank,attr"`
		Filter []struct {
			Val string `xml:"val,attr"`
		} `xml:"filter"`
	} `xml:"filters"`
	CustomFilters *struct {
		And    *string `xml:"and,attr"`
		Filter []struct {
			Operator *string `xml:"operator,attr"`
			Val      *string `xml:"val,attr"`
		} `xml:"customFilter"`
	} `xml:"customFilters"`
}

type sortStateXML struct {
	ColumnSort    *string `xml:"columnSort,attr"`
	CaseSensitive *string `xml:"caseSensitive,attr"`
	SortMethod    *string `xml:"sortMethod,attr"`
	Ref           *string `xml:"ref,attr"`
	Conditions    []struct {
		Descending *string `xml:"descending,attr"`
		SortBy     *string `xml:"sortBy,attr"`
		Ref        *string `xml:"ref,attr"`
		CustomList *string `xml:"customList,attr"`
		DxfID      *string `xml:"dxfId,attr"`
		IconSet    *string `xml:"iconSet,attr"`
		IconID     *string `xml:"iconId,attr"`
	} `xml:"sortCondition"`
}

type sheetExtrasXML struct {
	Cols       []colXML `xml:"cols>col"`
	AutoFilter *struct {
		Ref       *string           `xml:"ref,attr"`
		Columns   []filterColumnXML `xml:"filterColumn"`
		SortState *sortStateXML     `xml:"sortState"`
	} `xml:"autoFilter"`
	Sparklines []struct {
		F     *string `xml:"http://schemas.microsoft.com/office/excel/2006/main f"`
		Sqref *string `xml:"http://schemas.microsoft.com/office/excel/2006/main sqref"`
	} `xml:"extLst>ext>sparklineGroups>sparklineGroup>sparklines>sparkline"`
}

func (wb *workbook) extras(part string) (*sheetExtrasXML, error) {
	b, err := wb.z.read(part)
	if err != nil {
		return nil, err
	}
	var x sheetExtrasXML
	if err := xml.Unmarshal(b, &x); err != nil {
		return nil, fmt.Errorf("xlsx sheet %s: %w", part, err)
	}
	return &x, nil
}

// optBool is an optional xsd:boolean attribute as Python sees it.
func optBool(v *string, def any) string {
	if v == nil {
		return fmt.Sprint(def)
	}
	if xmlBool(*v, false) {
		return "True"
	}
	return "False"
}

func optStr(v *string) string {
	if v == nil {
		return "None"
	}
	return "'" + *v + "'"
}

// colProps compares openpyxl's column_dimensions of both sheets: one
// entry per <col>, keyed by the letter of its first column.
func (c *tableCtx) colProps(r map[string]any) (bool, error) {
	props := metric.Strings(r["props"])
	load := func(idx any) (map[string]string, error) {
		wb, sh, err := c.sheetAt(idx)
		if err != nil || sh == nil {
			return map[string]string{}, err
		}
		x, err := wb.extras(sh.part)
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, col := range x.Cols {
			if col.Min == nil {
				return nil, fmt.Errorf("<col> without min: %w", errPython)
			}
			min, err := strconv.Atoi(*col.Min)
			if err != nil || min < 1 || min > maxCols {
				return nil, fmt.Errorf("<col> min %q: %w", *col.Min, errPython)
			}
			var info []string
			for _, p := range props {
				v, err := colProp(col, p, min)
				if err != nil {
					return nil, err
				}
				info = append(info, p+"="+v)
			}
			out[colLetter(min)] = strings.Join(info, "\x00")
		}
		return out, nil
	}
	a, b, err := bothSides(r, load)
	if err != nil {
		return false, err
	}
	return mapsEqual(a, b), nil
}

// colProp is getattr(ColumnDimension, name), rendered.
func colProp(col colXML, name string, min int) (string, error) {
	num := func(v *string, def string) (string, error) {
		if v == nil {
			return def, nil
		}
		f, err := pyFloatAttr(*v)
		if err != nil {
			return "", fmt.Errorf("<col> number %q: %w", *v, errPython)
		}
		return strconv.FormatFloat(f, 'g', -1, 64), nil
	}
	switch name {
	case "width":
		return num(col.Width, "13")
	case "customWidth":
		w, err := num(col.Width, "13")
		return fmt.Sprint(w != "0"), err
	case "hidden":
		return optBool(col.Hidden, "False"), nil
	case "collapsed":
		return optBool(col.Collapsed, "False"), nil
	case "auto_size", "bestFit":
		return optBool(col.BestFit, "False"), nil
	case "min":
		return num(col.Min, "None")
	case "max":
		return num(col.Max, "None")
	case "outline_level", "outlineLevel":
		return num(col.OutlineLevel, "0")
	case "index":
		return colLetter(min), nil
	}
	return "", fmt.Errorf("column property %q: %w", name, errPython)
}

// filter compares load_filters of both sheets.
func (c *tableCtx) filter(r map[string]any) (bool, error) {
	load := func(idx any) (string, error) {
		wb, sh, err := c.sheetAt(idx)
		if err != nil || sh == nil {
			return "{}", err
		}
		x, err := wb.extras(sh.part)
		if err != nil {
			return "", err
		}
		return renderFilter(x), nil
	}
	a, b, err := bothSides(r, load)
	if err != nil {
		return false, err
	}
	return a == b, nil
}

// renderFilter renders load_filters' dict: the autofilter's range, its
// columns sorted by id (filter values as sets) and its sort state.
func renderFilter(x *sheetExtrasXML) string {
	af := x.AutoFilter
	if af == nil {
		return "ref=None;columns=[]"
	}
	var cols []string
	fcs := slices.Clone(af.Columns)
	sort.SliceStable(fcs, func(i, j int) bool { return fcs[i].ColID < fcs[j].ColID })
	for _, fc := range fcs {
		parts := []string{fmt.Sprint(fc.ColID), optBool(fc.HiddenButton, "False"), optBool(fc.ShowButton, "True")}
		if f := fc.Filters; f != nil {
			var vals []string
			for _, v := range f.Filter {
				vals = append(vals, v.Val)
			}
			slices.Sort(vals)
			parts = append(parts, "blank="+optBool(f.Blank, "None"), "filters="+strings.Join(slices.Compact(vals), "\x01"))
		}
		if cf := fc.CustomFilters; cf != nil {
			var vals []string
			for _, v := range cf.Filter {
				vals = append(vals, optStr(v.Operator)+"\x02"+optStr(v.Val))
			}
			slices.Sort(vals)
			parts = append(parts, "and="+optBool(cf.And, "None"), "custom="+strings.Join(slices.Compact(vals), "\x01"))
		}
		cols = append(cols, strings.Join(parts, "\x03"))
	}
	out := "ref=" + optStr(af.Ref) + ";columns=[" + strings.Join(cols, "\x04") + "]"
	if ss := af.SortState; ss != nil {
		var conds []string
		for _, c := range ss.Conditions {
			conds = append(conds, strings.Join([]string{optBool(c.Descending, "None"), optStr(c.SortBy), optStr(c.Ref),
				optStr(c.CustomList), optStr(c.DxfID), optStr(c.IconSet), optStr(c.IconID)}, "\x02"))
		}
		out += ";sort=" + strings.Join([]string{optBool(ss.ColumnSort, "None"), optBool(ss.CaseSensitive, "None"),
			optStr(ss.SortMethod), optStr(ss.Ref), strings.Join(conds, "\x01")}, "\x03")
	}
	return out
}

// sparkline compares load_sparklines of both sheets: sqref → formula,
// read from xl/worksheets/sheet{sheetId}.xml as OSWorld does.
func (c *tableCtx) sparkline(r map[string]any) (bool, error) {
	load := func(idx any) (map[string]string, error) {
		s, err := c.parseIdx(idx)
		if err != nil {
			return nil, err
		}
		wb, err := s.book()
		if err != nil {
			return nil, err
		}
		id := ""
		for _, ref := range wb.sheets {
			if ref.name == s.name {
				id = ref.sheetID
			}
		}
		if id == "" {
			return nil, fmt.Errorf("sheet %q: %w", s.name, errPython)
		}
		x, err := wb.extras("xl/worksheets/sheet" + id + ".xml")
		if oc := metric.OverCap(err); oc != nil {
			return nil, oc
		}
		if err != nil {
			return nil, fmt.Errorf("sheet %q: %w", s.name, errPython)
		}
		out := map[string]string{}
		for _, sp := range x.Sparklines {
			if sp.F == nil || sp.Sqref == nil {
				return nil, fmt.Errorf("sparkline without f or sqref: %w", errPython)
			}
			out[*sp.Sqref] = *sp.F
		}
		return out, nil
	}
	a, b, err := bothSides(r, load)
	if err != nil {
		return false, err
	}
	return mapsEqual(a, b), nil
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
