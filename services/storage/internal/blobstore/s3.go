package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3Config says where an S3 blob store lives.
type S3Config struct {
	// URL is s3://bucket/prefix.
	URL string
	// Endpoint is the server's base URL; empty means AWS.
	Endpoint string
	// Region defaults to us-east-1.
	Region string
	// AccessKey and SecretKey come from AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY; they are never logged.
	AccessKey, SecretKey string
}

// S3 stores blobs as objects <prefix>/sha256/<ab>/<sha> in a bucket. A PUT
// that the server acknowledged is durable by S3's contract.
type S3 struct {
	client *s3.Client
	bucket string
	prefix string
}

// ParseS3URL splits s3://bucket/prefix.
func ParseS3URL(raw string) (bucket, prefix string, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return "", "", fmt.Errorf("blob URL %q: want s3://bucket/prefix", raw)
	}
	prefix = strings.Trim(u.Path, "/")
	if prefix != "" {
		prefix += "/"
	}
	return u.Host, prefix, nil
}

// NewS3 connects to an S3-compatible server. It does not create the bucket.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	bucket, prefix, err := ParseS3URL(cfg.URL)
	if err != nil {
		return nil, err
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	opts := s3.Options{
		Region: region,
		// Path-style addressing: S3-compatible servers on a bare host:port
		// have no per-bucket DNS names.
		UsePathStyle:               true,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.AccessKey != "" {
		opts.Credentials = credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, "")
	}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	st := &S3{client: s3.New(opts), bucket: bucket, prefix: prefix}
	if _, err := st.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return nil, fmt.Errorf("check bucket %s: %w", bucket, err)
	}
	return st, nil
}

func (s *S3) key(key string) (string, error) {
	if !ValidKey(key) {
		return "", ErrBadKey
	}
	return s.prefix + "sha256/" + key[:2] + "/" + key, nil
}

// Put uploads data under key. The location it returns is always empty: the
// key alone finds an object.
func (s *S3) Put(ctx context.Context, key string, data []byte) (string, error) {
	k, err := s.key(key)
	if err != nil {
		return "", err
	}
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(k),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return "", fmt.Errorf("put object: %w", err)
	}
	return "", nil
}

// Write is Put: an object is durable once uploaded.
func (s *S3) Write(ctx context.Context, key string, data []byte) (string, error) {
	return s.Put(ctx, key, data)
}

// Sync has nothing to do: every Write was durable when it returned.
func (s *S3) Sync(context.Context) error { return nil }

// Open returns a reader of the blob; objects need no location or size.
func (s *S3) Open(ctx context.Context, key, _ string, _ int64) (io.ReadCloser, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)})
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("blob %s: %w", key, ErrNotFound)
		}
		return nil, fmt.Errorf("get object: %w", err)
	}
	return out.Body, nil
}

// Delete removes a blob; a missing blob is not an error.
func (s *S3) Delete(ctx context.Context, key, _ string, _ int64) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)}); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete object: %w", err)
	}
	return nil
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return true
	}
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "NotFound" || api.ErrorCode() == "NoSuchKey")
}
