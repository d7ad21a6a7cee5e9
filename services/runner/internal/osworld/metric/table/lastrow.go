package table

import (
	"fmt"
	"time"
)

// LastRow is what OSWorld's content_from_vm_file getter gives for an xlsx
// file with file_content "last_row": pd.read_excel(path) (the first
// sheet, its first row the header), then df.iloc[-1].astype(str).tolist().
// df.iloc[-1] is a Series of the columns' common dtype, so a value's text
// depends on the other columns too: "147.0" in a float column, or in an
// int column beside float ones only; "nan" for an empty cell, "NaT" in a
// date or duration column; a date as pandas prints a Timestamp (or, in a
// row of dates only, as it prints them together). ok is false when the
// sheet has no data row, where pandas raises.
func LastRow(path string) (row []string, ok bool, err error) {
	wb, err := openWorkbook(path)
	if err != nil {
		return nil, false, err
	}
	names := wb.sheetNames()
	if len(names) == 0 {
		return nil, false, nil
	}
	fr, err := wb.readFrame(names[0])
	if err != nil {
		return nil, false, err
	}
	if fr.rows == 0 {
		return nil, false, nil
	}
	vals := make([]pyVal, len(fr.cols))
	for i, col := range fr.cols {
		vals[i] = col[fr.rows-1]
	}
	out := make([]string, len(vals))
	switch rowDtype(fr.dtypes) {
	case dFloat64:
		for i, v := range vals {
			if f, isNum := number(v); isNum {
				v = pyVal{k: kFloat, f: f}
			}
			out[i] = pyStr(v)
		}
	case dDatetime:
		copy(out, datetimeSeriesStr(vals))
	case dTimedelta:
		copy(out, timedeltaSeriesStr(vals))
	default:
		for i, v := range vals {
			out[i] = pandasScalarStr(v, fr.dtypes[i])
		}
	}
	return out, true, nil
}

// rowDtype is the dtype of a DataFrame's row: the columns' dtype when they
// share one, float64 for ints and floats, else object.
func rowDtype(dts []dtype) dtype {
	same, numeric := true, true
	for _, dt := range dts {
		same = same && dt == dts[0]
		numeric = numeric && (dt == dInt64 || dt == dFloat64)
	}
	switch {
	case len(dts) == 0:
		return dObject
	case same:
		return dts[0]
	case numeric:
		return dFloat64
	}
	return dObject
}

// pandasScalarStr is str() of the value a row of object dtype holds for a
// column of dtype dt: a missing date or duration is NaT, a duration a
// pandas Timedelta.
func pandasScalarStr(v pyVal, dt dtype) string {
	switch {
	case (dt == dDatetime || dt == dTimedelta) && v.k == kNaN:
		return "NaT"
	case dt == dTimedelta && v.k == kDelta:
		return timedeltaLong(v.i)
	}
	return pyStr(v)
}

// datetimeSeriesStr is astype(str) of a Series of dates: only the date
// when every one is at midnight, else the time too, with as many fraction
// digits as the finest value needs (milliseconds here).
func datetimeSeriesStr(vals []pyVal) []string {
	datesOnly, millis := true, false
	for _, v := range vals {
		if v.k != kDate {
			continue
		}
		ms := v.i % 86400000
		if ms < 0 {
			ms += 86400000
		}
		datesOnly = datesOnly && ms == 0
		millis = millis || v.i%1000 != 0
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		if v.k != kDate {
			out[i] = "NaT"
			continue
		}
		t := windowsEpoch.Add(time.Duration(v.i) * time.Millisecond)
		switch {
		case datesOnly:
			out[i] = t.Format("2006-01-02")
		case millis:
			out[i] = t.Format("2006-01-02 15:04:05.000")
		default:
			out[i] = t.Format("2006-01-02 15:04:05")
		}
	}
	return out
}

// timedeltaSeriesStr is astype(str) of a Series of durations: "N days"
// when every one is a whole number of days, else each in Timedelta's
// long form.
func timedeltaSeriesStr(vals []pyVal) []string {
	const day = 86400e6
	whole := true
	for _, v := range vals {
		whole = whole && (v.k != kDelta || v.i%day == 0)
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		switch {
		case v.k != kDelta:
			out[i] = "NaT"
		case whole:
			out[i] = fmt.Sprintf("%d days", v.i/day)
		default:
			out[i] = timedeltaLong(v.i)
		}
	}
	return out
}

// timedeltaLong is str() of a pandas Timedelta of us microseconds:
// "D days HH:MM:SS[.ffffff]", a negative one as "-1 days +22:00:00".
func timedeltaLong(us int64) string {
	days, rest := floorDivMod(us, 86400e6)
	sign := " "
	if us < 0 {
		sign = " +"
	}
	s := fmt.Sprintf("%d days%s%02d:%02d:%02d", days, sign, rest/3600e6, rest/60e6%60, rest/1e6%60)
	if rest%1e6 != 0 {
		s += fmt.Sprintf(".%06d", rest%1e6)
	}
	return s
}

// pyTimedeltaStr is str() of a datetime.timedelta of us microseconds:
// "[D day[s], ]H:MM:SS[.ffffff]", days floored ("-1 day, 22:00:00").
func pyTimedeltaStr(us int64) string {
	days, rest := floorDivMod(us, 86400e6)
	s := fmt.Sprintf("%d:%02d:%02d", rest/3600e6, rest/60e6%60, rest/1e6%60)
	if days != 0 {
		plural := "s"
		if days == 1 || days == -1 {
			plural = ""
		}
		s = fmt.Sprintf("%d day%s, %s", days, plural, s)
	}
	if rest%1e6 != 0 {
		s += fmt.Sprintf(".%06d", rest%1e6)
	}
	return s
}

// floorDivMod is Python's divmod on integers: the quotient rounded down
// and a remainder of the divisor's sign.
func floorDivMod(a, b int64) (q, r int64) {
	q, r = a/b, a%b
	if r != 0 && (r < 0) != (b < 0) {
		q, r = q-1, r+b
	}
	return q, r
}
