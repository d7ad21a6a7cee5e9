package osworld

// appSteps and appGetters are the steps and getters for the desktop
// applications other than Chrome (VLC, GIMP, LibreOffice, VS Code, the OS
// itself).
var (
	appSteps   = map[string]stepFunc{}
	appGetters = map[string]getterFunc{}
)
