package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
)

type crdSource struct {
	crd  *apiextensionsv1.CustomResourceDefinition
	file string
}

// expandCRDPaths turns --crd arguments into an ordered list of files. A directory
// contributes its *.yaml/*.yml/*.json files in lexical order.
func expandCRDPaths(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("--crd %s: %w", a, err)
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || strings.HasPrefix(n, ".") {
				continue
			}
			if strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") || strings.HasSuffix(n, ".json") {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			files = append(files, filepath.Join(a, n))
		}
	}
	return files, nil
}

// loadCRDs reads every (possibly multi-document) file. A CRD with the same name as
// an earlier one replaces it: the last definition wins.
func loadCRDs(files []string) ([]crdSource, error) {
	var out []crdSource
	index := map[string]int{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := dec.Decode(crd); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if crd.Kind == "" && crd.Name == "" {
				continue // empty document
			}
			if crd.Kind != "CustomResourceDefinition" || crd.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
				return nil, fmt.Errorf("%s: document %q is %s %s, want apiextensions.k8s.io/v1 CustomResourceDefinition",
					file, crd.Name, crd.APIVersion, crd.Kind)
			}
			if i, ok := index[crd.Name]; ok {
				logf("CRD %s from %s is replaced by %s", crd.Name, out[i].file, file)
				out[i] = crdSource{crd: nil, file: out[i].file}
			}
			index[crd.Name] = len(out)
			out = append(out, crdSource{crd: crd, file: file})
		}
	}
	var res []crdSource
	for _, s := range out {
		if s.crd != nil {
			res = append(res, s)
		}
	}
	return res, nil
}

// installCRDs creates (or updates) the CRDs in order and waits until every one is
// Established and NamesAccepted.
func installCRDs(ctx context.Context, cfg *rest.Config, srcs []crdSource) error {
	if len(srcs) == 0 {
		return nil
	}
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, s := range srcs {
		_, err := crds.Create(ctx, s.crd, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = updateCRD(ctx, client, s.crd)
		}
		if err != nil {
			return fmt.Errorf("apply CRD %s (%s): %w", s.crd.Name, s.file, err)
		}
	}
	for _, s := range srcs {
		name := s.crd.Name
		var last string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			established, accepted := false, false
			for _, c := range got.Status.Conditions {
				switch c.Type {
				case apiextensionsv1.Established:
					established = c.Status == apiextensionsv1.ConditionTrue
				case apiextensionsv1.NamesAccepted:
					accepted = c.Status == apiextensionsv1.ConditionTrue
					if !accepted {
						last = c.Message
					}
				}
			}
			return established && accepted, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not Established/NamesAccepted: %v (%s)", name, err, last)
		}
		logf("CRD %s established (%s)", name, filepath.Base(s.file))
	}
	return nil
}

func updateCRD(ctx context.Context, client apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		next := crd.DeepCopy()
		next.ResourceVersion = cur.ResourceVersion
		_, err = crds.Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}
