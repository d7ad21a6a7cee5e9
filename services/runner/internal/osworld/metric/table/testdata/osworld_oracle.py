# Differential oracle for the tests (used when OSWORLD_REF names a checkout
# of OSWorld): runs OSWorld's own table.py, with pandas and openpyxl, on
# the cases the Go tests score. Stubs stand in for the modules table.py
# imports but these metrics never call (formulas, tldextract) and for
# rapidfuzz.fuzz.ratio and lxml.cssselect, which Debian may lack.
import os, sys, types, json, importlib.util, re
import lxml.etree
def stub(name, **attrs):
    m = types.ModuleType(name); m.__dict__.update(attrs); sys.modules[name] = m; return m
stub('formulas', Parser=lambda: None)
stub('tldextract')
def ratio(a, b):
    if not a and not b: return 100.0
    prev = [0]*(len(b)+1)
    for i in range(1, len(a)+1):
        cur = [0]*(len(b)+1)
        for j in range(1, len(b)+1):
            cur[j] = prev[j-1]+1 if a[i-1]==b[j-1] else max(prev[j], cur[j-1])
        prev = cur
    return 200.0*prev[len(b)]/(len(a)+len(b))
fz = stub('rapidfuzz.fuzz', ratio=ratio); stub('rapidfuzz', fuzz=fz)
class CSSSelector:
    def __init__(self, css, namespaces=None):
        parts = css.split('>')
        xp = 'descendant-or-self::' + '/'.join(p.replace('|', ':') for p in parts)
        xp = re.sub(r'\[r="([^"]*)"\]', r'[@r="\1"]', xp)
        self.x = lxml.etree.XPath(xp, namespaces=namespaces)
    def __call__(self, el): return self.x(el)
stub('lxml.cssselect', CSSSelector=CSSSelector)
import lxml; lxml.cssselect = sys.modules['lxml.cssselect']
for p in ['desktop_env', 'desktop_env.evaluators', 'desktop_env.evaluators.metrics']:
    stub(p)
base = os.environ['OSWORLD_REF'] + '/desktop_env/evaluators/metrics/'
for name in ['utils', 'table']:
    spec = importlib.util.spec_from_file_location('desktop_env.evaluators.metrics.' + name, base + name + '.py')
    mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; spec.loader.exec_module(mod)
table = sys.modules['desktop_env.evaluators.metrics.table']
import logging; logging.disable(logging.CRITICAL)
# stdin: JSON lines {"fn": name, "result": ..., "expected": ..., "options": {...}}
for line in sys.stdin:
    c = json.loads(line)
    fn = getattr(table, c['fn'])
    try:
        if c['fn'] == 'compare_conference_city_in_order':
            out = fn(c['result'], c['expected'])
        else:
            out = fn(c['result'], c.get('expected'), **c.get('options', {}))
        print(json.dumps({'score': out}))
    except Exception as e:
        print(json.dumps({'error': type(e).__name__ + ': ' + str(e)}))
    sys.stdout.flush()
