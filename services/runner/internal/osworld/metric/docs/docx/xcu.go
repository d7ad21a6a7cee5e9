package docx

// nsOOR is the namespace of LibreOffice's registry (registrymodifications.xcu).
const nsOOR = "http://openoffice.org/2001/registry"

// RegistryValue returns, from a LibreOffice registry file, the text of the
// last <value> of a prop named name under an item whose oor:path is
// itemPath, as ElementTree's findall walks them; ok is false when there
// is none or the value is empty (ElementTree's None), and err reports XML
// that does not parse.
func RegistryValue(data []byte, itemPath, name string) (value string, ok bool, err error) {
	root, err := parseXML(data, false)
	if err != nil {
		return "", false, err
	}
	root.walk(func(item *node) bool {
		if !item.is("", "item") {
			return true
		}
		if p, _ := item.attr(nsOOR, "path"); p != itemPath {
			return true
		}
		for _, k := range item.Kids {
			k.walk(func(prop *node) bool {
				if !prop.is("", "prop") {
					return true
				}
				if n, _ := prop.attr(nsOOR, "name"); n != name {
					return true
				}
				for _, v := range prop.children("", "value") {
					value = v.leadText()
					ok = value != ""
				}
				return true
			})
		}
		return true
	})
	return value, ok, nil
}
