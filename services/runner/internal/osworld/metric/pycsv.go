package metric

import (
	"errors"
	"fmt"
	"strings"
)

// Python's csv module with its default dialect (excel, strict off), as
// OSWorld's check_csv reads a file through csv.DictReader. Go's
// encoding/csv reads most files the same way, but not all: a character
// after a quoted field's closing quote ("ab"c is abc to Python and ab"c
// to Go with LazyQuotes), an empty first line (Python takes it as a
// header of no fields; Go skips it), and a field over Python's 131,072
// character limit (an error there). An agent writes the file, so each of
// these is a reward that would differ from OSWorld's. This is the state
// machine of CPython's Modules/_csv.c, over text already read with
// universal newlines (ReadPyText).

// pyCSVFieldLimit is csv.field_size_limit()'s default, in characters.
const pyCSVFieldLimit = 128 << 10

// errPyCSVFieldLimit is csv.Error's "field larger than field limit".
var errPyCSVFieldLimit = fmt.Errorf("field larger than field limit (%d)", pyCSVFieldLimit)

// pyCSVState is the reader's state between characters.
type pyCSVState int

const (
	csvStartRecord pyCSVState = iota
	csvStartField
	csvInField
	csvInQuotedField
	csvQuoteInQuotedField
	csvEatNewline
)

// pyCSVReader reads records as csv.reader does.
type pyCSVReader struct {
	lines  []string
	state  pyCSVState
	fields []string
	field  strings.Builder
	// runes is the field's length in characters, which the limit counts.
	runes int
}

func newPyCSVReader(text string) *pyCSVReader {
	return &pyCSVReader{lines: pyLines(text)}
}

// errEOF ends the records.
var errEOF = errors.New("end of records")

// next returns the next record: an empty one for an empty line, as
// csv.reader's [] is; errEOF after the last.
func (r *pyCSVReader) next() ([]string, error) {
	r.fields, r.state = nil, csvStartRecord
	r.field.Reset()
	r.runes = 0
	for {
		if len(r.lines) == 0 {
			// Every line's end closes the record but in a quoted field:
			// strict off keeps what the file ended in.
			if r.runes != 0 || r.state == csvInQuotedField {
				r.save()
				return r.fields, nil
			}
			return nil, errEOF
		}
		line := r.lines[0]
		r.lines = r.lines[1:]
		for _, c := range line {
			if err := r.char(c, false); err != nil {
				return nil, err
			}
		}
		if err := r.char(0, true); err != nil {
			return nil, err
		}
		if r.state == csvStartRecord {
			return r.fields, nil
		}
	}
}

func (r *pyCSVReader) save() {
	r.fields = append(r.fields, r.field.String())
	r.field.Reset()
	r.runes = 0
}

func (r *pyCSVReader) add(c rune) error {
	if r.runes >= pyCSVFieldLimit {
		return errPyCSVFieldLimit
	}
	r.field.WriteRune(c)
	r.runes++
	return nil
}

// char takes one character of a line, or the line's end (eol).
func (r *pyCSVReader) char(c rune, eol bool) error {
	newline := !eol && (c == '\n' || c == '\r')
	// endRecord saves the field at a line's end or a newline.
	endRecord := func() {
		r.save()
		if eol {
			r.state = csvStartRecord
		} else {
			r.state = csvEatNewline
		}
	}
	switch r.state {
	case csvStartRecord:
		switch {
		case eol:
			// An empty line: an empty record.
			return nil
		case newline:
			r.state = csvEatNewline
			return nil
		}
		r.state = csvStartField
		fallthrough
	case csvStartField:
		switch {
		case eol || newline:
			endRecord()
		case c == '"':
			r.state = csvInQuotedField
		case c == ',':
			r.save()
		default:
			r.state = csvInField
			return r.add(c)
		}
	case csvInField:
		switch {
		case eol || newline:
			endRecord()
		case c == ',':
			r.save()
			r.state = csvStartField
		default:
			return r.add(c)
		}
	case csvInQuotedField:
		switch {
		case eol:
		case c == '"':
			r.state = csvQuoteInQuotedField
		default:
			return r.add(c)
		}
	case csvQuoteInQuotedField:
		switch {
		case c == '"' && !eol:
			r.state = csvInQuotedField
			return r.add(c)
		case c == ',' && !eol:
			r.save()
			r.state = csvStartField
		case eol || newline:
			endRecord()
		default:
			// Strict off: what follows the closing quote belongs to the
			// field, unquoted.
			r.state = csvInField
			return r.add(c)
		}
	case csvEatNewline:
		switch {
		case newline:
		case eol:
			r.state = csvStartRecord
		default:
			return errors.New("new-line character seen in unquoted field")
		}
	}
	return nil
}

// dictRows is csv.DictReader over text: the first record names the fields
// (an empty first line names none, and every row is then empty), empty
// records are skipped, a missing field is None and fields past the names
// are left out (DictReader keys them None, which no rule can name).
func dictRows(text string) ([]map[string]any, error) {
	r := newPyCSVReader(text)
	header, err := r.next()
	if errors.Is(err, errEOF) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for {
		rec, err := r.next()
		if errors.Is(err, errEOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(rec) == 0 {
			continue
		}
		row := make(map[string]any, len(header))
		for i, name := range header {
			if i < len(rec) {
				row[name] = rec[i]
			} else {
				row[name] = nil
			}
		}
		out = append(out, row)
	}
}
