package main

import (
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// The media files are what the published tasks hand compare_audios and
// compare_videos: a song converted to MP3 from a music video (vlc
// 8f080098, about three and a half minutes), and a one-minute commercial
// turned the right way up (vlc aa4b5023).
const (
	songSeconds   = 210
	songRate      = 44100
	videoSeconds  = 60
	videoW        = 854
	videoH        = 480
	videoFPS      = 30
	videoDifferAt = 3 // seconds: the differing video is upside down from here on, within the 100 frames compare_videos reads
)

// songExpr is a stereo signal with the shape of music: a bass note and a
// chord that change every two seconds, beats, and a little noise, so that
// the MFCCs move from frame to frame as a song's do. The differing
// variant plays other notes over the last twenty seconds.
func songExpr(differ bool) string {
	// A note index that steps through a four-bar progression.
	step := "mod(floor(t/2),4)"
	if differ {
		step = fmt.Sprintf("if(gte(t,%d),4+mod(floor(t/2),3),mod(floor(t/2),4))", songSeconds-20)
	}
	root := "110*pow(2,(" + step + "*5)/12)"
	left := "0.35*sin(2*PI*" + root + "*t)+0.15*sin(2*PI*2.52*" + root + "*t)+0.12*sin(2*PI*3*" + root + "*t)" +
		"+0.25*exp(-12*mod(t,0.5))*sin(2*PI*60*t)+0.03*(random(0)-0.5)"
	right := "0.3*sin(2*PI*" + root + "*t+0.4)+0.15*sin(2*PI*2*" + root + "*t)+0.12*sin(2*PI*3.78*" + root + "*t)" +
		"+0.25*exp(-12*mod(t,0.5))*sin(2*PI*60*t)+0.03*(random(1)-0.5)"
	return left + "|" + right
}

// makeSong encodes the song to MP3 with LAME, as a converter would; the
// gold copy is made separately at another bit rate, as a task's gold
// file was made on another machine.
func makeSong(ctx context.Context, path string, differ bool, bitrate string) error {
	src := fmt.Sprintf("aevalsrc=exprs='%s':s=%d:d=%d", songExpr(differ), songRate, songSeconds)
	return ffmpeg(ctx, "-f", "lavfi", "-i", src, "-c:a", "libmp3lame", "-b:a", bitrate, path)
}

// makeVideo encodes a moving test pattern with H.264; the differing
// variant is upside down from videoDifferAt seconds on, as a video the
// agent did not turn would be against the gold one.
func makeVideo(ctx context.Context, path string, differ bool, crf int) error {
	vf := "null"
	if differ {
		vf = fmt.Sprintf("vflip=enable='gte(t,%d)',hflip=enable='gte(t,%d)'", videoDifferAt, videoDifferAt)
	}
	src := fmt.Sprintf("testsrc2=s=%dx%d:r=%d:d=%d", videoW, videoH, videoFPS, videoSeconds)
	return ffmpeg(ctx, "-f", "lavfi", "-i", src, "-vf", vf, "-c:v", "libx264", "-pix_fmt", "yuv420p",
		"-preset", "veryfast", "-crf", strconv.Itoa(crf), path)
}

func ffmpeg(ctx context.Context, args ...string) error {
	bin, err := exec.LookPath("ffmpeg")
	if err != nil {
		return fmt.Errorf("ffmpeg makes the audio and video files: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-nostdin", "-v", "error", "-y"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ffmpeg %v: %w\n%s", args, err, out)
	}
	return nil
}

// makeMedia makes the song and video pairs in out, the songs beside the
// videos (LAME runs on one core).
func makeMedia(ctx context.Context, out string) (song, video pair, err error) {
	song = pair{result: filepath.Join(out, "song_result.mp3"), same: filepath.Join(out, "song_same.mp3"), differ: filepath.Join(out, "song_differ.mp3")}
	video = pair{result: filepath.Join(out, "video_result.mp4"), same: filepath.Join(out, "video_same.mp4"), differ: filepath.Join(out, "video_differ.mp4")}
	var songErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, s := range []struct {
			path    string
			differ  bool
			bitrate string
		}{{song.result, false, "128k"}, {song.same, false, "192k"}, {song.differ, true, "192k"}} {
			if songErr = makeSong(ctx, s.path, s.differ, s.bitrate); songErr != nil {
				return
			}
		}
	})
	for _, v := range []struct {
		path   string
		differ bool
		crf    int
	}{{video.result, false, 23}, {video.same, false, 20}, {video.differ, true, 20}} {
		if err = makeVideo(ctx, v.path, v.differ, v.crf); err != nil {
			break
		}
	}
	wg.Wait()
	return song, video, cmp.Or(err, songErr)
}
