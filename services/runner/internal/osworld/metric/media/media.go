// Package media implements OSWorld's image, audio, video and PDF metrics
// (desktop_env/evaluators/metrics/gimp.py, vlc.py, pdf.py, others.py and the
// PDF comparisons of chrome.py).
//
// Images are decoded with Go's decoders and then handled as PIL handles
// them (modes, conversions, Pillow's fixed-point resampling, skimage's
// SSIM), because OSWorld's thresholds were tuned on those numbers. PDFs
// go through MuPDF's mutool (the engine of PyMuPDF, which OSWorld reads
// them with), poppler-utils standing in for text without it; audio and
// video through ffmpeg, and Ogg audio through libsndfile's sndfile-convert
// (soundfile's library, which librosa reads it with); all as bounded
// subprocesses.
package media

import "github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"

// Metrics returns the metrics of this package.
func Metrics() metric.Table {
	return metric.Table{
		// gimp.py
		"check_structure_sim":                         {Fn: metricStructureSim},
		"check_structure_sim_resized":                 {Fn: metricStructureSimResized},
		"check_structure_sim_with_threshold":          {Fn: metricStructureSimThreshold, Options: []string{"ssim_threshold"}},
		"check_file_exists_and_structure_sim":         {Fn: metricFileExistsStructure},
		"check_brightness_decrease_and_structure_sim": {Fn: metricBrightnessDecrease, Options: []string{"threshold"}},
		"check_contrast_increase_and_structure_sim":   {Fn: metricContrastIncrease},
		"check_saturation_increase_and_structure_sim": {Fn: metricSaturationIncrease},
		"check_palette_and_structure_sim":             {Fn: metricPaletteStructure},
		"check_green_background":                      {Fn: metricGreenBackground},
		"check_image_mirror":                          {Fn: metricImageMirror},
		"check_image_size":                            {Fn: metricImageSize},
		"check_image_file_size":                       {Fn: metricImageFileSize},
		"check_textbox_on_leftside":                   {Fn: metricTextboxLeft},
		"check_triangle_position":                     {Fn: metricTrianglePosition},
		"check_config_status":                         {Fn: metricGIMPConfigStatus},
		"compare_image_list":                          {Fn: metricCompareImageList},
		// vlc.py
		"compare_images":                            {Fn: metricCompareImages, Options: []string{"reference_base_result"}},
		"is_vlc_playing":                            {Fn: metricVLCPlaying},
		"is_vlc_recordings_folder":                  {Fn: metricVLCRecordingsFolder},
		"is_vlc_fullscreen":                         {Fn: metricVLCFullscreen},
		"check_qt_bgcone":                           {Fn: vlcValueMetric("qt-bgcone=", "expected_qt_bgcone", "1")},
		"check_qt_max_volume":                       {Fn: vlcValueMetric("qt-max-volume=", "expected_qt_max_volume", "125")},
		"check_qt_minimal_view":                     {Fn: vlcValueMetric("qt-minimal-view=", "expected_qt_minimal_view", "0")},
		"check_one_instance_when_started_from_file": {Fn: vlcValueMetric("one-instance-when-started-from-file=", "expected_one_instance_when_started_from_file", "1")},
		"check_play_and_exit":                       {Fn: vlcValueMetric("play-and-exit=", "expected_play_and_exit", "0")},
		"check_qt_slider_colours":                   {Fn: metricQtSliderColours},
		"check_global_key_play_pause":               {Fn: metricGlobalKeyPlayPause},
		"compare_videos":                            {Fn: metricCompareVideos, Options: []string{"max_frames_to_check", "threshold"}},
		"compare_audios":                            {Fn: metricCompareAudios},
		// others.py
		"check_mp3_meta": {Fn: metricMP3Meta},
		"compare_epub":   {Fn: metricCompareEPUB},
		// pdf.py and chrome.py
		"check_pdf_pages":    {Fn: metricPDFPages},
		"compare_pdfs":       {Fn: metricComparePDFs},
		"compare_pdf_images": {Fn: metricComparePDFImages},
	}
}
