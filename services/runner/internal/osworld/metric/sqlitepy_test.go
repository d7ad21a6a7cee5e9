package metric

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// sqlitePyDriver writes random Thunderbird-like SQLite databases (the
// published task's messages and messageAttributes tables, rows at random,
// now and then a file that is no database or a missing one) and scores
// them with run_sqlite3 of OSWorld's general.py against the task's query
// and queries whose one value is of every SQLite type, printing
// osworldpy.Case JSON. argv: metrics directory, output directory, seed,
// number of cases.
const sqlitePyDriver = `
import json, random, os, io, contextlib, sqlite3
stub("pdfplumber"); stub("docx", Document=None)
stub("rapidfuzz", fuzz=stub("rapidfuzz.fuzz", ratio=None))
load(PKG + ".utils", os.path.join(sys.argv[1], "utils.py"))
general = load("general", os.path.join(sys.argv[1], "general.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])
pick = rng.choice
TASK = "SELECT COALESCE((SELECT COUNT(*) FROM messageAttributes WHERE attributeID = 58 AND value = 1 AND messageID IN (SELECT id FROM messages WHERE folderID = 13)), 0) = (SELECT COUNT(*) FROM messages WHERE folderID = 13);"
QUERIES = [TASK, TASK, TASK, "SELECT COUNT(*) FROM messages", "SELECT 'abc'", "SELECT NULL", "SELECT 2.5", "SELECT x'31'", "SELECT x''",
           "SELECT x'ff'", "SELECT 1 WHERE 0", "SELECT '1e3'", "SELECT ' 7 '", "SELECT '1_0'", "SELECT ''", "SELECT 0.0", "SELECT -1",
           "SELECT id FROM messages ORDER BY id", "SELECT value FROM messageAttributes", "SELECT nope FROM messages"]
cases = []
for i in range(n):
    p = os.path.join(out, "db%05d.sqlite" % i)
    k = rng.randrange(10)
    if k == 0:
        with open(p, "w") as f:
            f.write("not a database")
    elif k == 1:
        p = os.path.join(out, "missing%05d.sqlite" % i)
    else:
        db = sqlite3.connect(p)
        db.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, folderID INTEGER)")
        db.execute("CREATE TABLE messageAttributes (attributeID INTEGER, value, messageID INTEGER)")
        for m in range(rng.randrange(5)):
            db.execute("INSERT INTO messages VALUES (?, ?)", (m + 1, pick([13, 13, 7])))
            for _ in range(rng.randrange(3)):
                db.execute("INSERT INTO messageAttributes VALUES (?, ?, ?)", (pick([58, 58, 12]), pick([1, 1, 0, "1", 1.0]), m + 1))
        db.commit()
        db.close()
    rules = {"sql": pick(QUERIES)}
    if k == 0 and "FROM" not in rules["sql"]:
        # SQLite reads a file only for a table, so Python answers a query
        # of constants on a file that is no database; the driver here
        # reads the file first and fails. The task's query reads tables.
        rules["sql"] = TASK
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(general.run_sqlite3(p, rules))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": "run_sqlite3", "result": p, "expected": rules, "options": {}, "score": score})
print(json.dumps(cases))
`

// TestRunSQLite3MatchesGeneralPy scores random databases with run_sqlite3 (1
// published task) here and in OSWorld's general.py (Python's sqlite3 and
// float()), and wants the same scores (a raise is a 0). A file that is no
// database meets only queries that read a table (see the driver). It runs
// only when OSWORLD_REF names an OSWorld checkout.
func TestRunSQLite3MatchesGeneralPy(t *testing.T) {
	out := osworldpy.Run(t, sqlitePyDriver, nil, osworldpy.MetricsDir(t), t.TempDir(), "1", "2000")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return General()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}
