package table

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// pandas.read_excel over openpyxl, reduced to what DataFrame.round and
// DataFrame.equals can see: column labels, one dtype per column, values.

// kind is the Python type of one value pandas holds.
type kind int

const (
	kEmpty kind = iota // the "" pandas puts for an empty cell, NaN after parsing
	kNaN
	kInt
	kFloat
	kBool
	kStr
	kDate   // datetime.datetime, in milliseconds from 1899-12-30
	kTime   // datetime.time, in milliseconds from midnight
	kDelta  // datetime.timedelta, in microseconds
	kBigInt // a Python int past int64: its float value, and its digits in s
)

// pyVal is one Python value of a cell.
type pyVal struct {
	k kind
	i int64
	f float64
	s string
	b bool
}

// dtype is a pandas column dtype.
type dtype int

const (
	dObject dtype = iota
	dInt64
	dFloat64
	dBool
	dDatetime
	dTimedelta
)

// frame is a DataFrame: labels, and per column a dtype and values.
type frame struct {
	labels []pyVal
	dtypes []dtype
	cols   [][]pyVal
	rows   int
}

var (
	windowsEpoch = time.Date(1899, 12, 30, 0, 0, 0, 0, time.UTC)
	macEpoch     = time.Date(1904, 1, 1, 0, 0, 0, 0, time.UTC)
)

// readOnlyValue is the value openpyxl's read-only, data-only reader gives
// a cell (what pandas reads): nil-like kEmpty for None.
func (wb *workbook) readOnlyValue(c xmlCell) (pyVal, error) {
	switch c.typ {
	case "inlineStr":
		if c.hasV && c.v != "" {
			return pyVal{k: kStr, s: c.v}, nil
		}
		if !c.hasIs {
			return pyVal{k: kEmpty}, nil
		}
		return pyVal{k: kStr, s: c.inline}, nil
	}
	if !c.hasV || c.v == "" {
		return pyVal{k: kEmpty}, nil
	}
	switch c.typ {
	case "", "n":
		v, err := castNumber(c.v)
		if err != nil {
			return pyVal{}, err
		}
		if wb.styles.dateXf[c.style] {
			return wb.fromExcel(v, wb.styles.timedeltaXf[c.style]), nil
		}
		return v, nil
	case "s":
		n, err := strconv.Atoi(strings.TrimSpace(c.v))
		if err != nil || n < 0 || n >= len(wb.shared) {
			return pyVal{}, fmt.Errorf("xlsx: shared string index %q", c.v)
		}
		return pyVal{k: kStr, s: wb.shared[n]}, nil
	case "b":
		n, err := strconv.Atoi(strings.TrimSpace(c.v))
		if err != nil {
			return pyVal{}, fmt.Errorf("xlsx: boolean %q", c.v)
		}
		return pyVal{k: kBool, b: n != 0}, nil
	case "e":
		return pyVal{k: kNaN}, nil
	case "d":
		t, err := parseISODate(c.v)
		if err != nil {
			return pyVal{}, err
		}
		return t, nil
	}
	return pyVal{k: kStr, s: c.v}, nil
}

// castNumber is openpyxl's _cast_number: a float when the text has a
// point or an exponent, else an int.
func castNumber(s string) (pyVal, error) {
	t := strings.TrimSpace(s)
	if strings.ContainsAny(t, ".eE") {
		f, err := strconv.ParseFloat(t, 64)
		if err != nil && !isRangeErr(err) {
			return pyVal{}, fmt.Errorf("xlsx: number %q", s)
		}
		return pyVal{k: kFloat, f: f}, nil
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err == nil {
		return pyVal{k: kInt, i: n}, nil
	}
	bi, ok := new(big.Int).SetString(t, 10)
	if !ok {
		return pyVal{}, fmt.Errorf("xlsx: number %q", s)
	}
	f, _ := new(big.Float).SetInt(bi).Float64()
	return pyVal{k: kBigInt, f: f, s: bi.String()}, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// fromExcel is openpyxl's from_excel: a serial number to a datetime, a
// time of day (for 0 <= v < 1) or, with an elapsed-time format, a
// timedelta. An out-of-range date is the error "#VALUE!", NaN to pandas.
func (wb *workbook) fromExcel(v pyVal, delta bool) pyVal {
	x := v.f
	if v.k == kInt {
		x = float64(v.i)
	}
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 4e6 {
		return pyVal{k: kNaN}
	}
	if delta {
		us := math.RoundToEven(x * 86400e6)
		// openpyxl rounds sub-second parts to milliseconds.
		sec := math.Floor(us / 1e6)
		frac := us - sec*1e6
		return pyVal{k: kDelta, i: int64(sec)*1e6 + int64(math.RoundToEven(frac/1e3))*1e3}
	}
	day := math.Floor(x)
	fraction := x - day
	diffMs := int64(math.RoundToEven(fraction * 86400 * 1000))
	if x >= 0 && x < 1 && diffMs < 86400000 {
		return pyVal{k: kTime, i: diffMs}
	}
	epoch := windowsEpoch
	if wb.date1904 {
		epoch = macEpoch
	}
	if x > 0 && x < 60 && !wb.date1904 {
		day++
	}
	t := epoch.Add(time.Duration(day) * 24 * time.Hour).Add(time.Duration(diffMs) * time.Millisecond)
	if t.Year() < 1 || t.Year() > 9999 {
		return pyVal{k: kNaN}
	}
	return pyVal{k: kDate, i: t.Sub(windowsEpoch).Milliseconds()}
}

// parseISODate reads a t="d" cell (ISO 8601).
func parseISODate(s string) (pyVal, error) {
	for _, layout := range []string{"2006-01-02T15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999", "2006-01-02", "15:04:05.999999999"} {
		if t, err := time.Parse(layout, strings.TrimSpace(s)); err == nil {
			if layout == "15:04:05.999999999" {
				return pyVal{k: kTime, i: int64(t.Hour()*3600000 + t.Minute()*60000 + t.Second()*1000 + t.Nanosecond()/1e6)}, nil
			}
			return pyVal{k: kDate, i: t.UTC().Sub(windowsEpoch).Milliseconds()}, nil
		}
	}
	return pyVal{}, fmt.Errorf("xlsx: date %q", s)
}

// isBlank is pandas' `== ""` test: an empty cell or an empty string.
func isBlank(v pyVal) bool { return v.k == kEmpty || v.k == kStr && v.s == "" }

// pandasCell is pandas' _convert_cell: None is "", an error NaN, an
// integral number an int.
func pandasCell(v pyVal) pyVal {
	switch v.k {
	case kFloat:
		if !math.IsInf(v.f, 0) && !math.IsNaN(v.f) && v.f == math.Trunc(v.f) {
			if v.f >= -9.2e18 && v.f <= 9.2e18 {
				return pyVal{k: kInt, i: int64(v.f)}
			}
			return pyVal{k: kBigInt, f: v.f, s: strconv.FormatFloat(v.f, 'f', 0, 64)}
		}
	}
	return v
}

// readFrame is pd.read_excel(book, sheet_name): the first row is the
// header, every other row (blank ones too) is data.
func (wb *workbook) readFrame(name string) (*frame, error) {
	s, err := wb.sheet(name)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("worksheet %q not found", name)
	}
	// openpyxl's read-only rows: from row 1, missing rows empty, each row
	// from column A to its last cell.
	byRow := map[int][]xmlCell{}
	maxRow := 0
	for _, c := range s.cells {
		byRow[c.row] = append(byRow[c.row], c)
		maxRow = max(maxRow, c.row)
	}
	data := make([][]pyVal, maxRow)
	lastWithData := -1
	width := 0
	for r, cells := range byRow {
		last := 0
		for _, c := range cells {
			last = max(last, c.col)
		}
		row := make([]pyVal, last)
		for _, c := range cells {
			v, err := wb.readOnlyValue(c)
			if err != nil {
				return nil, err
			}
			row[c.col-1] = pandasCell(v)
		}
		for len(row) > 0 && isBlank(row[len(row)-1]) {
			row = row[:len(row)-1]
		}
		if len(row) > 0 {
			lastWithData = max(lastWithData, r-1)
		}
		width = max(width, len(row))
		data[r-1] = row
	}
	if (lastWithData+1)*width > maxGridCells {
		return nil, fmt.Errorf("sheet %q: grid over %d cells: %w", name, maxGridCells, metric.ErrOverCap)
	}
	data = data[:lastWithData+1]
	fr := &frame{}
	if len(data) == 0 {
		return fr, nil
	}
	for i := range data {
		for len(data[i]) < width {
			data[i] = append(data[i], pyVal{k: kEmpty})
		}
	}
	fr.labels = headerLabels(data[0])
	fr.rows = len(data) - 1
	for j := 0; j < width; j++ {
		col := make([]pyVal, fr.rows)
		for i := range col {
			col[i] = data[i+1][j]
		}
		dt, vals := inferColumn(col)
		fr.dtypes = append(fr.dtypes, dt)
		fr.cols = append(fr.cols, vals)
	}
	return fr, nil
}

// headerLabels names the columns as pandas' python parser does: "" is
// "Unnamed: i", and a repeated label gets ".1", ".2", ... appended.
func headerLabels(row []pyVal) []pyVal {
	labels := make([]pyVal, len(row))
	for i, v := range row {
		if isBlank(v) {
			labels[i] = pyVal{k: kStr, s: fmt.Sprintf("Unnamed: %d", i)}
			continue
		}
		labels[i] = v
	}
	counts := map[string]int{}
	for i, col := range labels {
		n := counts[hashKey(col)]
		for n > 0 {
			counts[hashKey(col)] = n + 1
			col = pyVal{k: kStr, s: fmt.Sprintf("%s.%d", pyStr(col), n)}
			n = counts[hashKey(col)]
		}
		labels[i] = col
		counts[hashKey(col)] = n + 1
	}
	return labels
}

// hashKey groups values Python's dict would treat as one key (1 == 1.0
// == True).
func hashKey(v pyVal) string {
	switch v.k {
	case kInt, kFloat, kBool, kBigInt:
		f, _ := number(v)
		return "n" + strconv.FormatFloat(f, 'g', -1, 64)
	case kStr:
		return "s" + v.s
	case kNaN, kEmpty:
		return "nan"
	}
	return fmt.Sprintf("%d:%d", v.k, v.i)
}

// number is v as a float when Python treats it as a number.
func number(v pyVal) (float64, bool) {
	switch v.k {
	case kInt:
		return float64(v.i), true
	case kFloat, kBigInt:
		return v.f, true
	case kBool:
		if v.b {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// naStrings are pandas' default NA values (pandas 2 added "None").
var naStrings = map[string]bool{
	"": true, "#N/A": true, "#N/A N/A": true, "#NA": true, "-1.#IND": true, "-1.#QNAN": true,
	"-NaN": true, "-nan": true, "1.#IND": true, "1.#QNAN": true, "<NA>": true, "N/A": true,
	"NA": true, "NULL": true, "NaN": true, "None": true, "n/a": true, "nan": true, "null": true,
}

// inferColumn is pandas' type inference for one parsed column: NA
// strings to NaN, then numbers (numeric strings included), then booleans,
// then (in the DataFrame constructor) datetimes and timedeltas.
func inferColumn(col []pyVal) (dtype, []pyVal) {
	vals := make([]pyVal, len(col))
	for i, v := range col {
		if v.k == kEmpty || v.k == kStr && naStrings[v.s] {
			v = pyVal{k: kNaN}
		}
		vals[i] = v
	}
	if dt, nums, ok := convertNumeric(vals); ok {
		return dt, nums
	}
	if dt, bools, ok := convertBool(vals); ok {
		return dt, bools
	}
	allDate, allDelta, any := true, true, false
	for _, v := range vals {
		if v.k == kNaN {
			continue
		}
		any = true
		allDate = allDate && v.k == kDate
		allDelta = allDelta && v.k == kDelta
	}
	switch {
	case any && allDate:
		return dDatetime, vals
	case any && allDelta:
		return dTimedelta, vals
	}
	return dObject, vals
}

// convertNumeric is lib.maybe_convert_numeric: every value a number, a
// bool, NaN or a numeric string, or the column stays as it is.
func convertNumeric(vals []pyVal) (dtype, []pyVal, bool) {
	seenFloat, seenInt, seenBool, seenNull, seenBig := false, false, false, false, false
	out := make([]pyVal, len(vals))
	for i, v := range vals {
		switch v.k {
		case kNaN:
			seenNull = true
			out[i] = v
		case kInt:
			seenInt = true
			out[i] = v
		case kBigInt:
			seenBig = true
			out[i] = v
		case kFloat:
			seenFloat = true
			out[i] = v
		case kBool:
			seenBool = true
			out[i] = v
		case kStr:
			n, ok := numericString(v.s)
			if !ok {
				return 0, nil, false
			}
			switch n.k {
			case kInt:
				seenInt = true
			case kBigInt:
				seenBig = true
			default:
				seenFloat = true
			}
			out[i] = n
		default:
			return 0, nil, false
		}
	}
	switch {
	case seenFloat || seenNull || seenBig:
		for i, v := range out {
			if v.k == kNaN {
				continue
			}
			f, _ := number(v)
			out[i] = pyVal{k: kFloat, f: f}
		}
		return dFloat64, out, true
	case seenInt:
		for i, v := range out {
			f, _ := number(v)
			if v.k == kBool {
				out[i] = pyVal{k: kInt, i: int64(f)}
			}
		}
		return dInt64, out, true
	case seenBool:
		return dBool, out, true
	}
	// All NaN (or no rows): pandas gives float64, or object for no rows.
	if len(out) == 0 {
		return dObject, out, true
	}
	return dFloat64, out, true
}

// numericString is pandas' floatify of a string: surrounding blanks
// allowed, decimal digits with an optional exponent, inf and nan words.
func numericString(s string) (pyVal, bool) {
	t := strings.TrimSpace(s)
	if t == "" || strings.ContainsAny(t, "_xXpP") {
		return pyVal{}, false
	}
	digits := strings.TrimLeft(t, "+-")
	isInt := digits != "" && len(t)-len(digits) <= 1 && strings.Trim(digits, "0123456789") == ""
	if isInt {
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			return pyVal{k: kInt, i: n}, true
		}
		f, _ := strconv.ParseFloat(t, 64)
		return pyVal{k: kBigInt, f: f}, true
	}
	low := strings.ToLower(digits)
	switch low {
	case "inf", "infinity", "nan":
	default:
		if strings.ContainsAny(low, "abcdfghijklmnopqrstuvwyz") {
			return pyVal{}, false
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !isRangeErr(err) {
		return pyVal{}, false
	}
	return pyVal{k: kFloat, f: f}, true
}

// convertBool is libops.maybe_convert_bool with pandas' true/false words:
// a bool column, or an object column of bools and NaN.
func convertBool(vals []pyVal) (dtype, []pyVal, bool) {
	out := make([]pyVal, len(vals))
	null := false
	for i, v := range vals {
		switch {
		case v.k == kBool:
			out[i] = v
		case v.k == kNaN:
			null = true
			out[i] = v
		case v.k == kStr && (v.s == "True" || v.s == "TRUE" || v.s == "true"):
			out[i] = pyVal{k: kBool, b: true}
		case v.k == kStr && (v.s == "False" || v.s == "FALSE" || v.s == "false"):
			out[i] = pyVal{k: kBool, b: false}
		default:
			return 0, nil, false
		}
	}
	if null {
		return dObject, out, true
	}
	return dBool, out, true
}

// round is DataFrame.round(decimals): float columns only, as numpy's
// round does it (scale, round half to even, unscale).
func (fr *frame) round(decimals int) {
	scale := math.Pow(10, float64(decimals))
	for j, dt := range fr.dtypes {
		if dt != dFloat64 {
			continue
		}
		for i, v := range fr.cols[j] {
			if v.k == kFloat {
				if decimals >= 0 {
					fr.cols[j][i].f = math.RoundToEven(v.f*scale) / scale
				} else {
					fr.cols[j][i].f = math.RoundToEven(v.f/math.Pow(10, float64(-decimals))) * math.Pow(10, float64(-decimals))
				}
			}
		}
	}
}

// equals is DataFrame.equals: same shape and labels, the same dtype in
// every column, equal values with NaN equal to NaN.
func (fr *frame) equals(o *frame) bool {
	if len(fr.labels) != len(o.labels) || fr.rows != o.rows {
		return false
	}
	for j := range fr.labels {
		if !pyEq(fr.labels[j], o.labels[j]) {
			return false
		}
		if fr.dtypes[j] != o.dtypes[j] {
			return false
		}
		for i := range fr.cols[j] {
			if !pyEq(fr.cols[j][i], o.cols[j][i]) {
				return false
			}
		}
	}
	return true
}

// pyEq is Python's == between two cell values, with NaN equal to NaN as
// pandas' array_equivalent has it.
func pyEq(a, b pyVal) bool {
	an, bn := a.k == kNaN || a.k == kFloat && math.IsNaN(a.f), b.k == kNaN || b.k == kFloat && math.IsNaN(b.f)
	if an || bn {
		return an && bn
	}
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	if a.k != b.k {
		return false
	}
	switch a.k {
	case kStr:
		return a.s == b.s
	case kEmpty:
		return true
	}
	return a.i == b.i
}

// pyStr is Python's str() of a cell value.
func pyStr(v pyVal) string {
	switch v.k {
	case kEmpty:
		return ""
	case kNaN:
		return "nan"
	case kInt:
		return strconv.FormatInt(v.i, 10)
	case kBigInt:
		if v.s != "" {
			return v.s
		}
		return strconv.FormatFloat(v.f, 'f', 0, 64)
	case kFloat:
		return metric.PyFloatRepr(v.f)
	case kBool:
		if v.b {
			return "True"
		}
		return "False"
	case kStr:
		return v.s
	case kDate:
		t := windowsEpoch.Add(time.Duration(v.i) * time.Millisecond)
		if t.Nanosecond() != 0 {
			return t.Format("2006-01-02 15:04:05.000000")
		}
		return t.Format("2006-01-02 15:04:05")
	case kTime:
		t := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(v.i) * time.Millisecond)
		if t.Nanosecond() != 0 {
			return t.Format("15:04:05.000000")
		}
		return t.Format("15:04:05")
	case kDelta:
		return pyTimedeltaStr(v.i)
	}
	return ""
}
