package osworld

// chromeSteps and chromeGetters are the steps and getters that drive Chrome
// over the DevTools protocol or read its profile.
var (
	chromeSteps   = map[string]stepFunc{}
	chromeGetters = map[string]getterFunc{}
)
