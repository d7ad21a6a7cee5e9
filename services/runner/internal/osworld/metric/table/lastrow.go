package table

// LastRow is what OSWorld's content_from_vm_file getter gives for an xlsx
// file with file_content "last_row": pd.read_excel(path) (the first
// sheet, its first row the header), then df.iloc[-1].astype(str).tolist():
// each value of the last data row as Python's str() of its pandas value
// ("147.0" in a column pandas read as floats, "nan" for an empty cell).
// ok is false when the sheet has no data row, where pandas raises.
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
	out := make([]string, len(fr.cols))
	for i, col := range fr.cols {
		out[i] = pyStr(col[fr.rows-1])
	}
	return out, true, nil
}
