package media

import (
	"slices"
	"strconv"
	"strings"
)

// id3Genres are the genre names an ID3 genre number stands for: ID3v1's
// 0-79 and Winamp's additions, as mutagen's TCON reads them.
var id3Genres = [...]string{
	"Blues", "Classic Rock", "Country", "Dance", "Disco", "Funk", "Grunge", "Hip-Hop",
	"Jazz", "Metal", "New Age", "Oldies", "Other", "Pop", "R&B", "Rap",
	"Reggae", "Rock", "Techno", "Industrial", "Alternative", "Ska", "Death Metal", "Pranks",
	"Soundtrack", "Euro-Techno", "Ambient", "Trip-Hop", "Vocal", "Jazz+Funk", "Fusion", "Trance",
	"Classical", "Instrumental", "Acid", "House", "Game", "Sound Clip", "Gospel", "Noise",
	"Alt. Rock", "Bass", "Soul", "Punk", "Space", "Meditative", "Instrumental Pop", "Instrumental Rock",
	"Ethnic", "Gothic", "Darkwave", "Techno-Industrial", "Electronic", "Pop-Folk", "Eurodance", "Dream",
	"Southern Rock", "Comedy", "Cult", "Gangsta Rap", "Top 40", "Christian Rap", "Pop/Funk", "Jungle",
	"Native American", "Cabaret", "New Wave", "Psychedelic", "Rave", "Showtunes", "Trailer", "Lo-Fi",
	"Tribal", "Acid Punk", "Acid Jazz", "Polka", "Retro", "Musical", "Rock & Roll", "Hard Rock",
	"Folk", "Folk-Rock", "National Folk", "Swing", "Fast-Fusion", "Bebop", "Latin", "Revival",
	"Celtic", "Bluegrass", "Avantgarde", "Gothic Rock", "Progressive Rock", "Psychedelic Rock", "Symphonic Rock", "Slow Rock",
	"Big Band", "Chorus", "Easy Listening", "Acoustic", "Humour", "Speech", "Chanson", "Opera",
	"Chamber Music", "Sonata", "Symphony", "Booty Bass", "Primus", "Porn Groove", "Satire", "Slow Jam",
	"Club", "Tango", "Samba", "Folklore", "Ballad", "Power Ballad", "Rhythmic Soul", "Freestyle",
	"Duet", "Punk Rock", "Drum Solo", "A Cappella", "Euro-House", "Dance Hall", "Goa", "Drum & Bass",
	"Club-House", "Hardcore", "Terror", "Indie", "BritPop", "Afro-Punk", "Polsk Punk", "Beat",
	"Christian Gangsta Rap", "Heavy Metal", "Black Metal", "Crossover", "Contemporary Christian", "Christian Rock", "Merengue", "Salsa",
	"Thrash Metal", "Anime", "JPop", "Synthpop", "Abstract", "Art Rock", "Baroque", "Bhangra",
	"Big Beat", "Breakbeat", "Chillout", "Downtempo", "Dub", "EBM", "Eclectic", "Electro",
	"Electroclash", "Emo", "Experimental", "Garage", "Global", "IDM", "Illbient", "Industro-Goth",
	"Jam Band", "Krautrock", "Leftfield", "Lounge", "Math Rock", "New Romantic", "Nu-Breakz", "Post-Punk",
	"Post-Rock", "Psytrance", "Shoegaze", "Space Rock", "Trop Rock", "World Music", "Neoclassical", "Audiobook",
	"Audio Theatre", "Neue Deutsche Welle", "Podcast", "Indie Rock", "G-Funk", "Dubstep", "Garage Rock", "Psybient",
}

// tconGenres reads a TCON frame's values as mutagen's TCON.genres does,
// which is what EasyID3's "genre" gives: a number alone is ID3v1's genre
// ("17" is Rock, an unknown one below 256 is Unknown), "CR" and "RX" are
// Cover and Remix, and a value may start with such references in
// parentheses, "(17)(RX)", then a name, "(17)Rock" ("((" escapes a name's
// first parenthesis). Only ASCII digits count as numbers here; Python's
// isdigit also takes other scripts' digits, which no tagger writes.
func tconGenres(values []string) []string {
	var out []string
	for _, v := range values {
		switch n, isNum := asciiNumber(v); {
		case isNum && n < 256:
			out = append(out, genreName(n))
		case v == "CR":
			out = append(out, "Cover")
		case v == "RX":
			out = append(out, "Remix")
		case v != "":
			out = append(out, parseGenreValue(v)...)
		}
	}
	return out
}

// parseGenreValue is mutagen's pattern ((?:\((?P<id>[0-9]+|RX|CR)\))*)(?P<str>.+)?
// matched at the value's start: the references, then the name up to the
// first newline (Python's "." stops there).
func parseGenreValue(v string) []string {
	var out []string
	rest := v
refs:
	for strings.HasPrefix(rest, "(") {
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			break
		}
		id := rest[1:end]
		n, isNum := asciiNumber(id)
		switch {
		case isNum:
			out = append(out, genreName(n))
		case id == "CR":
			out = append(out, "Cover")
		case id == "RX":
			out = append(out, "Remix")
		default:
			// Not a reference: the name starts at this parenthesis.
			break refs
		}
		rest = rest[end+1:]
	}
	if i := strings.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i]
	}
	if rest != "" {
		if strings.HasPrefix(rest, "((") {
			rest = rest[1:]
		}
		if !slices.Contains(out, rest) {
			out = append(out, rest)
		}
	}
	return out
}

// genreName is GENRES[n], or Unknown past its end.
func genreName(n int) string {
	if n < len(id3Genres) {
		return id3Genres[n]
	}
	return "Unknown"
}

// asciiNumber reads s as a decimal number of ASCII digits only; big
// numbers saturate, which keeps them over every bound compared here.
func asciiNumber(s string) (int, bool) {
	if !allASCIIDigits(s, 1) {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 1 << 30, true
	}
	return n, true
}
