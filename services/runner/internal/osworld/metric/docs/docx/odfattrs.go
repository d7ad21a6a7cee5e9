package docx

import "strings"

// odfpy's Element.getAttribute("name") finds the attribute by its
// allowed-attribute list: the ODF 1.2 schema's attributes for the element,
// as odfpy 1.4's grammar lists them. An element the schema gives no
// attribute whose local name reads "name" (any unknown element too)
// raises. nameAttrNS maps each element that has one, as "namespace
// local", to the namespace of that attribute. This is schema fact, listed
// here because the metrics read only these two attributes.
var nameAttrNS = func() map[string]string {
	m := map[string]string{}
	for _, g := range []struct{ prefix, attrPrefix, locals string }{
		{"anim", "anim", "param"},
		{"chart", "chart", "axis"},
		{"config", "config", "config-item config-item-map-entry config-item-map-indexed config-item-map-named config-item-set"},
		{"draw", "draw", "caption circle connector control custom-shape ellipse equation fill-image frame g gradient hatch layer line marker measure opacity page page-thumbnail param path polygon polyline rect regular-polygon stroke-dash"},
		{"draw", "office", "a area-circle area-polygon area-rectangle"},
		{"form", "form", "button checkbox column combobox date file fixed-text form formatted-text frame generic-control grid hidden image image-frame listbox number password radio text textarea time value-range"},
		{"meta", "meta", "user-defined"},
		{"number", "style", "boolean-style currency-style date-style number-style percentage-style text-style time-style"},
		{"office", "draw", "annotation"},
		{"office", "office", "annotation-end dde-source"},
		{"presentation", "presentation", "date-time-decl footer-decl header-decl show"},
		{"style", "style", "font-face master-page page-layout presentation-page-layout style"},
		{"svg", "draw", "linearGradient radialGradient"},
		{"svg", "svg", "font-face-name"},
		{"table", "table", "cell-range-source content-validation data-pilot-group data-pilot-group-member data-pilot-member data-pilot-table database-range named-expression named-range operation source-service table table-template"},
		{"text", "office", "a dde-connection-decl"},
		{"text", "style", "list-style outline-style"},
		{"text", "text", "alphabetical-index bibliography bookmark bookmark-end bookmark-start execute-macro illustration-index index-title object-index reference-mark reference-mark-end reference-mark-start section sequence sequence-decl table-index table-of-content user-defined user-field-decl user-field-get user-field-input user-index variable-decl variable-get variable-input variable-set"},
	} {
		for _, l := range strings.Fields(g.locals) {
			m[odfNamespaces[g.prefix]+" "+l] = odfNamespaces[g.attrPrefix]
		}
	}
	return m
}()

// backgroundElements are the elements the schema gives fo:background-color
// (odfpy's getAttribute("backgroundcolor")); on any other it raises.
var backgroundElements = setOf("graphic-properties", "header-footer-properties", "page-layout-properties",
	"paragraph-properties", "section-properties", "table-cell-properties", "table-properties",
	"table-row-properties", "text-properties")

// odfNamespaces are the namespaces of the prefixes above.
var odfNamespaces = map[string]string{
	"anim":         "urn:oasis:names:tc:opendocument:xmlns:animation:1.0",
	"chart":        "urn:oasis:names:tc:opendocument:xmlns:chart:1.0",
	"config":       "urn:oasis:names:tc:opendocument:xmlns:config:1.0",
	"draw":         "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
	"form":         "urn:oasis:names:tc:opendocument:xmlns:form:1.0",
	"meta":         "urn:oasis:names:tc:opendocument:xmlns:meta:1.0",
	"number":       "urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0",
	"office":       nsOffice,
	"presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
	"style":        nsStyle,
	"svg":          "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0",
	"table":        "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
	"text":         nsText,
}
