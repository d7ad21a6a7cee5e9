package osworld

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // rule_relativeTime names IANA zones; hosts may lack zoneinfo
)

// timeNow is the host clock rule_relativeTime reads when the task names a
// time zone; tests replace it.
var timeNow = time.Now

// civil is a calendar date: rule_relativeTime only ever reads the date of
// its datetimes, so the arithmetic is on dates, free of DST.
type civil struct{ t time.Time }

func civilOf(t time.Time) civil {
	return civil{time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)}
}

func date(y int, m time.Month, d int) civil { return civil{time.Date(y, m, d, 0, 0, 0, 0, time.UTC)} }

func (c civil) add(days int) civil { return civil{c.t.AddDate(0, 0, days)} }

// weekday is Python's datetime.weekday(): Monday 0 to Sunday 6.
func (c civil) weekday() int { return (int(c.t.Weekday()) + 6) % 7 }

// relativeDays are OSWorld's relativeTime_to_IntDay: the names it knows,
// with a day offset, or -1 for the ones it computes case by case. A name
// outside raises KeyError there.
var relativeDays = map[string]int{
	"tomorrow":                        1,
	"5th next month":                  -1,
	"10th next month":                 -1,
	"11th next month":                 -1,
	"this month":                      -1,
	"this Saturday":                   -1,
	"this Sunday":                     -1,
	"next Monday":                     -1,
	"next Friday":                     -1,
	"next Saturday":                   -1,
	"next Sunday":                     -1,
	"next week Friday":                -1,
	"next week Saturday":              -1,
	"next week Sunday":                -1,
	"first monday four months later":  -1,
	"first monday eight months later": -1,
	"next Monday split":               -1,
	"next Friday split":               -1,
}

// getRuleRelativeTime is rule_relativeTime: the rules with the expected
// dates filled in from relative ones ("next Monday", "10th next month")
// with OSWorld's arithmetic and placeholders ({DoW}, {Month0D}...), on a
// copy (OSWorld rewrites the task's own rules).
func getRuleRelativeTime(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	rules, err := copyRules(cfg["rules"])
	if err != nil {
		return nil, fmt.Errorf("rule_relativeTime: %w", err)
	}
	rel, ok := rules["relativeTime"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("rule_relativeTime: rules.relativeTime must be an object")
	}
	expected, ok := rules["expected"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("rule_relativeTime: rules.expected must be an object")
	}
	now, err := s.relativeNow(ctx, rules)
	if err != nil {
		return nil, fmt.Errorf("rule_relativeTime: %w", err)
	}
	if err := applyRelativeTime(rel, expected, now); err != nil {
		return nil, fmt.Errorf("rule_relativeTime: %w", err)
	}
	return rules, nil
}

// copyRules deep-copies the rules through JSON, so the task keeps its
// templates for the next episode.
func copyRules(v any) (map[string]any, error) {
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("rules must be an object")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(b, &out)
}

// relativeNow is "today" as OSWorld picks it: in the task's time zone when
// it names one (UTC when the name is unknown), else the guest's local date,
// else UTC. (OSWorld's last fallback asks an IP geolocation service for a
// zone; the runner does not, so that case is UTC.)
func (s *Session) relativeNow(ctx context.Context, rules map[string]any) (civil, error) {
	if tz, _ := rules["timezone"].(string); tz != "" {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			loc = time.UTC
		}
		return civilOf(timeNow().In(loc)), nil
	}
	// OSWorld prints datetime.now().astimezone().isoformat() with Python in
	// the guest; date(1) gives the same local date without needing Python.
	res, err := s.Guest.Execute(ctx, []string{"date", "+%Y-%m-%dT%H:%M:%S%:z"}, false, false)
	out := res.Output
	if err != nil && !refused(err) {
		return civil{}, err
	}
	if t, perr := parseISODate(strings.TrimSpace(out)); err == nil && perr == nil {
		return t, nil
	}
	return civilOf(timeNow().UTC()), nil
}

// parseISODate reads the date of Python's datetime.isoformat().
func parseISODate(s string) (civil, error) {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return civil{}, fmt.Errorf("not an ISO date: %q", truncateText(s, 64))
	}
	y, err1 := strconv.Atoi(s[:4])
	m, err2 := strconv.Atoi(s[5:7])
	d, err3 := strconv.Atoi(s[8:10])
	if err1 != nil || err2 != nil || err3 != nil || m < 1 || m > 12 || d < 1 || d > 31 {
		return civil{}, fmt.Errorf("not an ISO date: %q", truncateText(s, 64))
	}
	return date(y, time.Month(m), d), nil
}

// nextMonth is the month after now's, rolling the year over.
func nextMonth(now civil, day int) civil {
	y, m := now.t.Year(), now.t.Month()
	if m == 12 {
		return date(y+1, 1, day)
	}
	return date(y, m+1, day)
}

// firstMondayLater is the first Monday of the month `months` after now's.
// OSWorld computes the month as (month+months)%12, which is 0 and raises
// for the month that should give December; this gives December there.
func firstMondayLater(now civil, months int) civil {
	y, m := now.t.Year(), int(now.t.Month())
	if m+months > 12 {
		y++
	}
	nm := (m + months) % 12
	if nm == 0 {
		nm = 12
	}
	first := date(y, time.Month(nm), 1)
	return first.add(((6 - first.weekday()) + 1) % 7)
}

func lookupRelative(name string) (int, error) {
	d, ok := relativeDays[name]
	if !ok {
		return 0, fmt.Errorf("unknown relative time %q", name)
	}
	return d, nil
}

// applyRelativeTime fills expected from rel as get_rule_relativeTime does:
// "time" from a lone "from"; "from" and "to" (or the split puDay/doDay
// keys) for a range.
func applyRelativeTime(rel, expected map[string]any, now civil) error {
	from, _ := rel["from"].(string)
	fromDays, err := lookupRelative(from)
	if err != nil {
		return err
	}
	wd := now.weekday()
	if _, hasTo := rel["to"]; !hasTo {
		var day civil
		switch {
		case fromDays >= 0:
			day = now.add(fromDays)
		case from == "5th next month":
			day = nextMonth(now, 5)
		case from == "10th next month":
			day = nextMonth(now, 10)
		case from == "this month":
			day = now
		case from == "next Monday":
			day = now.add(6 - wd + 1)
		case from == "first monday four months later":
			day = firstMondayLater(now, 4)
		case from == "first monday eight months later":
			day = firstMondayLater(now, 8)
		default:
			return fmt.Errorf("relative time %q is not computed for a single date", from)
		}
		switch tv := expected["time"].(type) {
		case string:
			expected["time"] = formatRelative(tv, day)
		case []any:
			out := make([]any, len(tv))
			for i, e := range tv {
				es, ok := e.(string)
				if !ok {
					return fmt.Errorf("expected.time entries must be strings")
				}
				out[i] = formatRelative(es, day)
			}
			expected["time"] = out
		default:
			return fmt.Errorf("expected.time must be a string or a list of strings")
		}
		return nil
	}
	to, _ := rel["to"].(string)
	toDays, err := lookupRelative(to)
	if err != nil {
		return err
	}
	var fromDay civil
	switch {
	case fromDays >= 0:
		fromDay = now.add(fromDays)
	case from == "this Saturday":
		fromDay = now.add(5 - wd)
	case from == "10th next month":
		fromDay = nextMonth(now, 10)
	case from == "next Monday" || from == "next Monday split":
		fromDay = now.add(6 - wd + 1)
	case from == "next Friday":
		switch {
		case wd < 4:
			fromDay = now.add(4 - wd)
		case wd == 4:
			fromDay = now.add(7)
		default:
			fromDay = now.add(7 - wd + 4)
		}
	case from == "next Saturday":
		switch {
		case wd < 5:
			fromDay = now.add(5 - wd)
		case wd == 5:
			fromDay = now.add(7)
		default:
			fromDay = now.add(6)
		}
	case from == "next week Friday":
		fromDay = now.add(7 - wd + 4)
	case from == "next week Saturday":
		fromDay = now.add(7 - wd + 5)
	case from == "next week Sunday":
		fromDay = now.add(7 - wd + 6)
	default:
		return fmt.Errorf("relative time %q is not computed as a range start", from)
	}
	if from == "next Monday split" {
		if err := formatKeys(expected, fromDay, "puDay", "puMonth", "puYear"); err != nil {
			return err
		}
	} else if err := formatKeys(expected, fromDay, "from"); err != nil {
		return err
	}
	var toDay civil
	switch {
	case toDays >= 0:
		toDay = now.add(toDays)
	case to == "this Sunday":
		toDay = now.add(6 - wd)
	case to == "11th next month":
		toDay = nextMonth(now, 11)
	case to == "next Friday" || to == "next Friday split":
		switch {
		case from == "next Monday" || from == "next Monday split":
			toDay = fromDay.add(4)
		case wd < 4:
			toDay = now.add(4 - wd)
		default:
			toDay = now.add(6 - wd + 5)
		}
	case to == "next Sunday":
		switch {
		case from == "next Friday" || from == "next Saturday":
			toDay = fromDay.add(6 - fromDay.weekday())
		case wd < 6:
			toDay = now.add(6 - wd)
		default:
			toDay = now.add(7)
		}
	case to == "next week Sunday":
		if from == "next week Friday" || from == "next week Saturday" {
			toDay = fromDay.add(6 - fromDay.weekday())
		} else {
			toDay = now.add(7 - wd + 6)
		}
	default:
		return fmt.Errorf("relative time %q is not computed as a range end", to)
	}
	if to == "next Friday split" {
		return formatKeys(expected, toDay, "doDay", "doMonth", "doYear")
	}
	return formatKeys(expected, toDay, "to")
}

func formatKeys(expected map[string]any, day civil, keys ...string) error {
	for _, k := range keys {
		v, ok := expected[k].(string)
		if !ok {
			return fmt.Errorf("expected.%s must be a string", k)
		}
		expected[k] = formatRelative(v, day)
	}
	return nil
}

var (
	weekdayAbbr = [...]string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}
	monthAbbr   = [...]string{"", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
	monthFull   = [...]string{"", "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
)

// formatRelative is apply_rules_to_timeFormat: each placeholder replaced
// once (its first occurrence), in OSWorld's order.
func formatRelative(f string, day civil) string {
	m, d := int(day.t.Month()), day.t.Day()
	for _, r := range [][2]string{
		{"{DoW}", weekdayAbbr[day.weekday()]},
		{"{Month}", monthAbbr[m]},
		{"{DayD}", strconv.Itoa(d)},
		{"{Year}", strconv.Itoa(day.t.Year())},
		{"{Month0D}", fmt.Sprintf("%02d", m)},
		{"{month}", strings.ToLower(monthFull[m])},
		{"{MonthFull}", monthFull[m]},
		{"{Day0D}", fmt.Sprintf("%02d", d)},
		{"{MonthD}", strconv.Itoa(m)},
	} {
		f = strings.Replace(f, r[0], r[1], 1)
	}
	return f
}
