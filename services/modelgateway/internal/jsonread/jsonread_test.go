package jsonread

import (
	"testing"

	"github.com/valyala/fastjson"
)

func TestReader(t *testing.T) {
	doc := fastjson.MustParse(`{"s":"a\u00e9","bad":"` + "\xff" + `","b":true,"i":-7,"f":2.5,"big":1e400,"o":{},"a":[1,2],"n":null}`)
	tests := []struct {
		name    string
		read    func(r *Reader) any
		want    any
		wantErr string
	}{
		{"string", func(r *Reader) any { return r.Str(doc.Get("s"), "s") }, "aé", ""},
		{"invalid UTF-8 replaced", func(r *Reader) any { return r.Str(doc.Get("bad"), "bad") }, "\uFFFD", ""},
		{"missing string", func(r *Reader) any { return r.Str(doc.Get("x"), "x") }, "", ""},
		{"null string", func(r *Reader) any { return r.Str(doc.Get("n"), "n") }, "", ""},
		{"number as string", func(r *Reader) any { return r.Str(doc.Get("i"), "i") }, "", "i: want a string, got number"},
		{"bool", func(r *Reader) any { return r.Bool(doc.Get("b"), "b") }, true, ""},
		{"string as bool", func(r *Reader) any { return r.Bool(doc.Get("s"), "s") }, false, "s: want true or false, got string"},
		{"int", func(r *Reader) any { return r.Int(doc.Get("i"), "i") }, -7, ""},
		{"fraction as int", func(r *Reader) any { return r.Int(doc.Get("f"), "f") }, 0, "f: want an integer, got number"},
		{"number", func(r *Reader) any { return r.Num(doc.Get("f"), "f") }, 2.5, ""},
		{"overflowing number", func(r *Reader) any { _ = r.Num(doc.Get("big"), "big"); return nil }, nil, "big: want a finite number, got number"},
		{"object", func(r *Reader) any { return r.Object(doc.Get("o"), "o") }, true, ""},
		{"null object", func(r *Reader) any { return r.Object(doc.Get("n"), "n") }, false, ""},
		{"array as object", func(r *Reader) any { return r.Object(doc.Get("a"), "a") }, false, "a: want an object, got array"},
		{"array", func(r *Reader) any { return len(r.Array(doc.Get("a"), "a")) }, 2, ""},
		{"object as array", func(r *Reader) any { return len(r.Array(doc.Get("o"), "o")) }, 0, "o: want an array, got object"},
		{"first error kept", func(r *Reader) any { r.Str(doc.Get("i"), "first"); return r.Str(doc.Get("b"), "second") }, "", "first: want a string, got number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Reader
			if got := tt.read(&r); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			gotErr := ""
			if r.Err != nil {
				gotErr = r.Err.Error()
			}
			if gotErr != tt.wantErr {
				t.Errorf("error %q, want %q", gotErr, tt.wantErr)
			}
		})
	}
}

func TestVisitStopsAtError(t *testing.T) {
	var r Reader
	var seen []string
	r.Visit(fastjson.MustParse(`{"a":1,"b":"x","c":3}`), func(k []byte, v *fastjson.Value) {
		seen = append(seen, string(k))
		r.Str(v, string(k))
	})
	if len(seen) != 1 || r.Err == nil {
		t.Errorf("visited %v with error %v; want a only, then stop on its error", seen, r.Err)
	}
}
